"""Spec judge parsing, judge calls through a fake LLM, the human-review CSV round trip, agreement."""

import csv
from types import SimpleNamespace

import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.analysis import spec_labels as sl
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.llm.prompts import load_template

BUGGY = "def get_positive(l: list):\n    return [e for e in l if e < 0]\n"
FIXED = "def get_positive(l: list):\n    return [e for e in l if e > 0]\n"


class FakeJudge:
    """Same method as LLMResource.run_batch; answers by task_id, records the requests."""

    def __init__(self, answers):
        self.answers = answers
        self.requests = []

    def run_batch(self, warehouse, requests, log=None):
        self.requests += requests
        out = []
        for r in requests:
            text, finish, error = self.answers[r.task_id]
            out.append(SimpleNamespace(text=text, finish_reason=finish, error=error, model="judge-9b",
                                       cache_key=f"k-{r.task_id}", reasoning=None))
        return out


def problems(n=3):
    return pd.DataFrame({
        "task_id": [f"Python/{i}" for i in range(n)], "problem_idx": list(range(n)),
        "entry_point": ["get_positive"] * n, "buggy_code": [BUGGY] * n, "fixed_code": [FIXED] * n,
    })


@pytest.mark.parametrize("text, expected", [
    ("TRANSCRIBES_BUG: yes\nSTATES_CORRECT: no", (True, False)),
    ("transcribes_bug: NO\nstates_correct: Yes.", (False, True)),
    ("**TRANSCRIBES_BUG:** yes\n**STATES_CORRECT:** no", (True, False)),
    ("- TRANSCRIBES_BUG: `no`\n- STATES_CORRECT: `yes`", (False, True)),
    ("<think>TRANSCRIBES_BUG: no</think>\nTRANSCRIBES_BUG: yes\nSTATES_CORRECT: no", (True, False)),
])
def test_parse_strict_format(text, expected):
    got = sl.parse_judge_answer(text)
    assert (got.transcribes_bug, got.states_correct) == expected and got.error is None


@pytest.mark.parametrize("text, expected, reason", [
    ("Yes, it transcribes the bug. It does not state the correct behaviour.", (None, None), "no line"),
    ("TRANSCRIBES_BUG: yes", (True, None), "STATES_CORRECT"),
    ("TRANSCRIBES_BUG: yes\nTRANSCRIBES_BUG: no\nSTATES_CORRECT: no", (None, False), "conflicting"),
    ("TRANSCRIBES_BUG: maybe\nSTATES_CORRECT: no", (None, False), "TRANSCRIBES_BUG"),
    ("TRANSCRIBES_BUG: yes, mostly\nSTATES_CORRECT: no", (None, False), "TRANSCRIBES_BUG"),
    ("", (None, None), "empty"),
])
def test_unparseable_labels_stay_null_with_reason(text, expected, reason):
    got = sl.parse_judge_answer(text)
    assert (got.transcribes_bug, got.states_correct) == expected
    assert reason in got.error


def judge_template():
    return load_template(sl.JUDGE_TEMPLATE, settings.prompts_dir())


def test_diff_shows_both_versions():
    d = sl.bug_diff(BUGGY, FIXED)
    assert "-    return [e for e in l if e < 0]" in d and "+    return [e for e in l if e > 0]" in d
    assert " def get_positive(l: list):" in d


def test_judge_specs_sends_diff_and_spec_and_never_guesses():
    specs = pd.DataFrame({
        "thinking": "off", "task_id": ["Python/0", "Python/1", "Python/2", "Python/9"], "problem_idx": [0, 1, 2, 9],
        "spec_text": ["Return the negative numbers in the list.", "Return the positive numbers.", "", "x"],
        "error": [None, None, "timeout", None],
    })
    judge = FakeJudge({
        "Python/0": ("TRANSCRIBES_BUG: yes\nSTATES_CORRECT: no", "stop", None),
        "Python/1": ("It restores the correct behaviour", "length", None),
    })
    rows = sl.judge_specs(specs, problems(), judge, warehouse=None, template=judge_template(),
                          max_tokens=64).set_index("task_id")
    assert [r.task_id for r in judge.requests] == ["Python/0", "Python/1"]  # empty spec, unknown problem: not sent
    req = judge.requests[0]
    assert req.asset == "spec_labels" and req.enable_thinking is False and req.max_tokens == 64
    prompt = req.messages[0]["content"]
    assert "Return the negative numbers in the list." in prompt and "+    return [e for e in l if e > 0]" in prompt
    assert rows.loc["Python/0", "judge_transcribes_bug"] is True
    assert rows.loc["Python/0", "judge_states_correct"] is False
    assert rows.loc["Python/0", "judge_model"] == "judge-9b"
    assert pd.isna(rows.loc["Python/1", "judge_transcribes_bug"])
    assert "unparseable" in rows.loc["Python/1", "judge_error"] and "token cap" in rows.loc["Python/1", "judge_error"]
    assert "no spec text" in rows.loc["Python/2", "judge_error"] and "timeout" in rows.loc["Python/2", "judge_error"]
    assert "problem not stored" in rows.loc["Python/9", "judge_error"]


def test_judge_call_error_is_stored_not_labelled():
    specs = pd.DataFrame({"thinking": "on", "task_id": ["Python/0"], "problem_idx": [0], "spec_text": ["s"],
                          "error": [None]})
    rows = sl.judge_specs(specs, problems(), FakeJudge({"Python/0": ("", None, "HTTP 500")}), None,
                          template=judge_template(), max_tokens=settings.DEFAULT_JUDGE_MAX_TOKENS)
    assert rows.iloc[0]["judge_error"] == "judge call failed: HTTP 500"
    assert pd.isna(rows.iloc[0]["judge_transcribes_bug"])


def _specs(n=30, thinking="off"):
    return pd.DataFrame({"thinking": thinking, "task_id": [f"Python/{i}" for i in range(n)],
                         "problem_idx": list(range(n)), "spec_text": [f"Spec number {i}." for i in range(n)],
                         "error": None})


def test_review_sample_is_seeded_and_per_mode():
    specs = pd.concat([_specs(30), _specs(30, "on"), _specs(5, "on").assign(thinking="x")], ignore_index=True)
    a = sl.review_sample(specs, 20, seed=7)
    b = sl.review_sample(specs.sample(frac=1, random_state=1), 20, seed=7)  # row order does not matter
    assert list(a["task_id"] + a["thinking"]) == list(b["task_id"] + b["thinking"])
    assert a.groupby("thinking").size().to_dict() == {"off": 20, "on": 20, "x": 5}
    c = sl.review_sample(specs, 20, seed=8)
    assert set(c["task_id"] + c["thinking"]) != set(a["task_id"] + a["thinking"])


def _fill(path, labels):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
        fields = list(rows[0])
    for r in rows:
        if r["task_id"] in labels:
            r["human_transcribes_bug"], r["human_states_correct"] = labels[r["task_id"]]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return rows


def test_review_csv_round_trip_human_labels_win_and_agreement(tmp_path):
    n = 6
    specs = _specs(n)
    probs = problems(n)
    path = tmp_path / "review" / "spec_labels_review.csv"
    sample = sl.review_sample(specs, 4, seed=1)
    assert sl.write_review_csv(path, sample, probs) == 4
    rows = _fill(path, {})
    assert "judge_transcribes_bug" not in rows[0]  # blind review
    assert "+    return [e for e in l if e > 0]" in rows[0]["diff"]
    picked = [r["task_id"] for r in rows]
    # a person labels three of the four; the fourth stays blank
    human = {picked[0]: ("yes", "no"), picked[1]: ("no", "no"), picked[2]: ("Yes", "")}
    _fill(path, human)
    assert sl.write_review_csv(path, sample, probs) == 0  # existing rows kept, nothing added
    judged = pd.DataFrame({
        "thinking": "off", "task_id": specs["task_id"], "problem_idx": range(n), "entry_point": "get_positive",
        "spec_sha256": [sl.sha256_text(t) for t in specs["spec_text"]], "judge_model": "j",
        "judge_template_sha256": "t", "judge_prompt_sha256": "p", "judge_cache_key": "k",
        "judge_finish_reason": "stop", "judge_text": "...",
        "judge_transcribes_bug": [True] * n, "judge_states_correct": [False] * n,
        "judge_error": None,
    })
    labels, notes = sl.combine(judged, sl.read_review_csv(path))
    assert notes == []
    lab = labels.set_index("task_id")
    assert lab["in_review_sample"].sum() == 4
    # human "no, no" replaces the judge's "yes": the spec moves to 'neither'
    assert lab.loc[picked[1], "transcribes_bug"] is False and lab.loc[picked[1], "category"] == "neither"
    assert lab.loc[picked[1], "label_source"] == "human"
    # human gave only label (a): (b) stays the judge's
    assert lab.loc[picked[2], "label_source"] == "human+judge"
    assert lab.loc[picked[3], "label_source"] == "judge"
    not_reviewed = [t for t in specs["task_id"] if t not in picked]
    assert (lab.loc[not_reviewed, "label_source"] == "judge").all()
    ag = sl.agreement(labels).set_index("label")
    assert ag.loc["transcribes_bug", "n_reviewed"] == 3 and ag.loc["transcribes_bug", "n_agree"] == 2
    assert ag.loc["transcribes_bug", "agreement"] == pytest.approx(2 / 3)


def test_review_rows_for_an_older_spec_are_ignored(tmp_path):
    specs, probs = _specs(3), problems(3)
    path = tmp_path / "r.csv"
    sl.write_review_csv(path, specs, probs)
    _fill(path, {"Python/0": ("no", "yes")})
    judged = sl.judge_specs(specs.assign(spec_text="A regenerated spec."), probs,
                            FakeJudge({f"Python/{i}": ("TRANSCRIBES_BUG: yes\nSTATES_CORRECT: no", "stop", None)
                                       for i in range(3)}), None,
                            template=judge_template(), max_tokens=settings.DEFAULT_JUDGE_MAX_TOKENS)
    labels, notes = sl.combine(judged, sl.read_review_csv(path))
    assert any("older spec" in n for n in notes)
    assert labels.set_index("task_id").loc["Python/0", "label_source"] == "judge"


def test_review_csv_rejects_a_non_yes_no_value(tmp_path):
    path = tmp_path / "r.csv"
    sl.write_review_csv(path, _specs(2), problems(2))
    _fill(path, {"Python/1": ("perhaps", "")})
    # the file's line holding the bad label (the last record's last line), not the record number 3
    line = next(n for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "perhaps" in text)
    assert line > 3
    with pytest.raises(ConfigError, match=f"line {line}: .*perhaps"):
        sl.read_review_csv(path)


def test_new_thinking_mode_is_appended_without_touching_labels(tmp_path):
    path = tmp_path / "r.csv"
    probs = problems(3)
    sl.write_review_csv(path, _specs(3), probs)
    _fill(path, {"Python/0": ("yes", "no")})
    assert sl.write_review_csv(path, _specs(3, "on"), probs) == 3
    got = sl.read_review_csv(path)
    assert len(got) == 6 and got.iloc[0]["human_transcribes_bug"] is True


def test_category_rule():
    assert sl.category(True, True) == "transcribes_bug"
    assert sl.category(False, True) == "restores_correct"
    assert sl.category(False, False) == "neither"
    assert sl.category(None, True) is None and sl.category(False, None) is None




def test_a_modes_sample_does_not_depend_on_other_modes():
    both = pd.concat([_specs(30), _specs(30, "on")], ignore_index=True)
    alone = sl.review_sample(_specs(30, "on"), 20, seed=3)
    with_off = sl.review_sample(both, 20, seed=3)
    assert list(alone["task_id"]) == list(with_off[with_off["thinking"] == "on"]["task_id"])


def test_judge_prompt_shows_the_format_without_a_concrete_answer():
    """A small judge copies an example answer; the prompt shows placeholders only."""
    import re

    template = judge_template()
    text, _ = sl.judge_prompt(template, "get_positive", sl.bug_diff(BUGGY, FIXED), "Return the negatives.")
    concrete = re.compile(r"^\W*(TRANSCRIBES_BUG|STATES_CORRECT)\W*:\W*(yes|no)\W*$", re.I | re.M)
    assert not concrete.search(text), concrete.search(text).group(0)
    assert "TRANSCRIBES_BUG: <yes|no>" in text and "STATES_CORRECT: <yes|no>" in text
    # a judge that echoes the placeholders gets no label, never a guessed one
    echoed = sl.parse_judge_answer("TRANSCRIBES_BUG: <yes|no>\nSTATES_CORRECT: <yes|no>")
    assert (echoed.transcribes_bug, echoed.states_correct) == (None, None) and echoed.error
    # a judge that keeps the angle brackets around its answer is still read
    bracketed = sl.parse_judge_answer("TRANSCRIBES_BUG: <no>\nSTATES_CORRECT: <yes>")
    assert (bracketed.transcribes_bug, bracketed.states_correct) == (False, True)


def _judged(n, transcribes, states):
    return pd.DataFrame({
        "thinking": "off", "task_id": [f"Python/{i}" for i in range(n)], "problem_idx": range(n),
        "entry_point": "get_positive", "spec_sha256": None, "judge_model": "j", "judge_template_sha256": "t",
        "judge_prompt_sha256": "p", "judge_cache_key": "k", "judge_finish_reason": "stop", "judge_text": "...",
        "judge_transcribes_bug": transcribes, "judge_states_correct": states, "judge_error": None,
    })


def test_execution_judge_wins_over_the_llm_judge_and_the_human_over_both():
    from evalmislead_assets.analysis.spec_examples import EXEC_COLUMNS

    judged = _judged(4, [False] * 4, [True] * 4)  # the LLM judge: restores_correct everywhere
    executed = pd.DataFrame({"thinking": "off", "task_id": [f"Python/{i}" for i in range(4)],
                             "exec_category": ["transcribes_bug", "restores_correct", None, "transcribes_bug"],
                             "exec_note": [None, None, "no example the extractor can read", None],
                             "exec_n_examples": [3, 2, 0, 1]})
    for c in EXEC_COLUMNS:
        executed[c] = executed.get(c)
    human = pd.DataFrame({"thinking": ["off"], "task_id": ["Python/3"], "review_spec_sha256": [None],
                          "human_transcribes_bug": [False], "human_states_correct": [False], "human_note": [None]})
    labels, _ = sl.combine(judged, human, executed)
    lab = labels.set_index("task_id")
    assert lab["category"].tolist() == ["transcribes_bug", "restores_correct", "restores_correct", "neither"]
    # (a) from the execution judge, (b) left to the LLM judge: the execution judge does not say (b) of a transcriber
    assert lab["label_source"].tolist() == ["execution+judge", "execution", "judge", "human"]
    assert lab["judges_agree"].tolist()[:2] == [False, True] and pd.isna(lab.loc["Python/2", "judges_agree"])
    ag = sl.agreement(labels).set_index("label")
    assert (ag.loc["execution_vs_judge", "n_reviewed"], ag.loc["execution_vs_judge", "n_agree"]) == (3, 1)
    # the one reviewed spec: the human says neither, the execution judge transcribes_bug
    assert (ag.loc["execution_vs_human", "n_reviewed"], ag.loc["execution_vs_human", "n_agree"]) == (1, 0)
    counts = sl.execution_counts(labels).set_index("exec_category")["n_specs"].to_dict()
    assert counts == {"no_evidence": 1, "restores_correct": 1, "transcribes_bug": 2}


def test_without_execution_rows_the_labels_are_the_llm_judges_and_agreement_has_no_execution_rows():
    labels, _ = sl.combine(_judged(2, [True, False], [False, True]), None)
    assert labels["label_source"].tolist() == ["judge", "judge"]
    assert labels["exec_category"].isna().all() and labels["judges_agree"].isna().all()
    assert set(sl.agreement(labels)["label"]) == {"transcribes_bug", "states_correct", "category"}
