"""Fixtures for the chapter's reference cases; tests never read ../shared."""

import pytest
from refcases import Case


@pytest.fixture
def case():
    """Return a factory: case('napkin_9_2_pool_scheduling') -> Case."""
    return Case
