"""Tests for fleetlib.program.schema: one home for the rung's columns, categories and parts."""

from __future__ import annotations

import pandas as pd
import pytest

from fleetlib.program import breakdown, classify, commands, schema, stragglers
from fleetlib.program.readers import rank_timers
from fleetlib.quality import DomainError


def test_every_old_home_re_exports_the_schema_constants():
    assert breakdown.PARTITION_PARTS is schema.PARTITION_PARTS
    assert classify.KINDS is schema.KINDS and classify.COLLECTIVES is schema.COLLECTIVES
    assert classify.SYNC_KINDS is schema.SYNC_KINDS
    assert stragglers.RANK_TIMER_COLUMNS is schema.RANK_TIMER_COLUMNS is rank_timers.RANK_TIMER_COLUMNS
    assert commands.MODEL_KEYS[0] == "accelerator"


def test_every_part_has_a_label_and_a_short_label():
    assert set(schema.PARTITION_LABELS) == set(schema.PARTITION_PARTS) == set(schema.PARTITION_SHORT_LABELS)
    assert max(map(len, schema.PARTITION_SHORT_LABELS.values())) <= 10


def test_table_dtypes_match_the_columns():
    for table in ("kernels", "steps", "host_syncs", "ops"):
        cols = tuple(schema.table_dtypes(table))
        assert cols[:len(schema.TABLE_COLUMNS[table])] == schema.TABLE_COLUMNS[table]
    assert list(schema.table_dtypes("kernels")["kind"].categories) == list(schema.KINDS)


def test_column_validators():
    frame = pd.DataFrame({"rank": [0], "step": [1]})
    assert schema.missing_columns(frame, "rank_timers") == ["duration_s"]
    assert schema.missing_columns(frame, ("rank",)) == []
    with pytest.raises(DomainError, match=r"timers lacks the columns \['duration_s'\]"):
        schema.require_columns(frame, "rank_timers", "timers")
    with pytest.raises(DomainError, match="DataFrame"):
        schema.require_columns([1], "kernels")
