"""Confined reads: a listed folder's links may not lead out of the bundle; its special files are ledgered.

A symbolic link inside a folder the manifest lists (``traces:``) that leads outside the bundle is refused
by name, link and target, before anything behind it is read; a named pipe there is never opened and is
named in the fleet's ledger (``special_file``) rather than skipped without a word.
"""

from __future__ import annotations

import json
import os

import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.fleet.synth import synth_fleet
from fleetlib.quality import InputError


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("confined") / "bundle"
    written = synth_fleet(out, devices=16, days=0.25, seed=3)
    return written.manifest


def _trace_folder(manifest):
    folders = [p for paths in measure_fleet_traces(manifest) for p in paths if p.is_dir()]
    assert folders, "the synthetic bundle lists a traces folder"
    return folders[0]


def measure_fleet_traces(manifest):
    from fleetlib.fleet.manifest import load_manifest

    return load_manifest(manifest).traces.values()


def test_a_link_out_of_a_listed_traces_folder_is_refused_naming_link_and_target(bundle, tmp_path):
    folder = _trace_folder(bundle)
    secret = tmp_path / "outside" / "secret.json"
    secret.parent.mkdir()
    secret.write_text(json.dumps({"traceEvents": []}))
    link = folder / "zz_outside.json"
    link.symlink_to(secret)
    try:
        with pytest.raises(InputError) as info:
            measure_fleet(bundle)
    finally:
        link.unlink()
    message = str(info.value)
    assert f"the link {link} leads to {secret.resolve()}" in message, message
    assert "--allow-path" in message


def test_a_named_pipe_in_a_listed_traces_folder_is_ledgered_not_read(bundle):
    from fleetlib.program import read_traces

    folder = _trace_folder(bundle)
    pipe = folder / "zz_pipe.json"
    os.mkfifo(pipe)
    try:
        traces = read_traces(folder, cache=False, progress=False)  # a FIFO opened would block here
    finally:
        pipe.unlink()
    notes = [f for f in traces.ledger.flags if f.code == "special_file"]
    assert [n.file for n in notes] == [str(pipe)], notes
    assert "named pipe" in notes[0].message
    assert str(pipe) not in {str(r.path) for r in traces.reads}
