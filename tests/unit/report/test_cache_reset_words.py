"""What the report says was done to an arm's caches before its blocks (#40 item 1)."""

from speculab.report.phrases import cache_reset_phrase


def test_every_outcome_is_said_with_its_count_of_the_blocks() -> None:
    assert cache_reset_phrase({"reset": 4}) == "cache reset before 4 of 4 blocks"
    assert cache_reset_phrase({"refused": 1, "reset": 3}) == (
        "cache reset before 3 of 4 blocks; cache reset refused before 1 of 4 blocks"
    )
    assert cache_reset_phrase({"off": 2}) == "no cache reset (cache: {reset: never}) before 2 of 2 blocks"
    assert "the engine has no endpoint" in cache_reset_phrase({"unavailable": 2})


def test_a_run_that_kept_none_says_nothing() -> None:
    assert cache_reset_phrase({}) == ""
