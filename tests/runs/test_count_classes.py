"""The run's count of conversion findings per class of difference (`summary.reference.cause_classes`)."""

from harness.runs.third_side import count_classes


def test_a_case_past_the_search_limit_is_counted_not_traced_not_unexplained():
    def finding(case: str, cause: dict) -> dict:
        return {"class": "conversion", "case_id": case, "cause": cause}

    findings = [finding("a", {"cause": "add_space_prefix", "class": "gguf-key"}),
                finding("b", {"cause": "unexplained", "class": "unexplained"}),
                finding("c", {"cause": "unexplained"}),
                finding("d", {"cause": "not traced", "why": "past the first 300 cases searched"}),
                {"class": "decode", "case_id": "e", "cause": {"cause": "x", "class": "gguf-key"}}]
    assert count_classes(findings) == {"gguf-key": 1, "unexplained": 2, "not traced": 1}
