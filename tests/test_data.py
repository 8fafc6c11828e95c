"""Loaders for every supported format, label mapping, caching, padding, and bad input."""

from __future__ import annotations

import os
import sys
import urllib.error
from pathlib import Path

import pandas as pd
import pytest

from seedvar.config import load_config
from seedvar.data.io import fingerprint, read_table, subsample
from seedvar.data.sources import canonical, check_groups, read_source
from seedvar.data.tokenized import tokenize_cached
from seedvar.errors import DataError
from seedvar.pretrained import load_tokenizer
from seedvar.training.datamodule import PadToLongest
from tests.helpers import FIXTURES, OFFLINE, QUICK, REPO, run_command

MNLI_COLUMNS = ["id", "premise", "hypothesis", "label"]
CONFIG = load_config(None, profile="smoke")  # the paper's declaration: MNLI -> HANS
TASK = CONFIG.task
HANS = CONFIG.diagnostics["hans"]
HANS_GROUPS = list(HANS.groups)
NO_DOWNLOADS = Path("unused-download-dir")  # file sources never download


def load_task_set(source: str | Path) -> pd.DataFrame:
    """One MNLI set as the study loads it: the task's fields, labels and dropped labels."""
    frame, origin = read_source(str(source), NO_DOWNLOADS)
    return canonical(frame, TASK.fields, TASK.text, TASK.labels, origin, None, TASK.drop_labels)


def hans_examples(frame: pd.DataFrame, origin: str) -> pd.DataFrame:
    """A raw HANS table as the study brings it to the canonical schema, groups checked."""
    examples = canonical(frame, HANS.fields, TASK.text, HANS.labels, origin, HANS_GROUPS)
    check_groups(examples, HANS, origin)
    return examples


def load_hans(source: str | Path, download_dir: Path) -> pd.DataFrame:
    """The HANS set as the study loads it (a file, or a URL downloaded into `download_dir`)."""
    return hans_examples(*read_source(str(source), download_dir))


def test_glue_tsv_keeps_quotes_and_maps_labels():
    frame = load_task_set(FIXTURES / "glue_dev_matched.tsv")
    assert list(frame.columns) == MNLI_COLUMNS
    assert frame["label"].tolist() == [1, 2, 0]
    assert '"searchable"' in frame["premise"][1]


def test_glue_tsv_ids_are_the_glue_index():
    frame = load_task_set(FIXTURES / "glue_dev_matched.tsv")
    assert frame["id"].tolist() == ["0", "1", "2"]


def test_multinli_jsonl_drops_pairs_without_consensus():
    frame = load_task_set(FIXTURES / "multinli_1.0_dev_matched.jsonl")
    assert frame["label"].tolist() == [1, 0, 2]
    assert frame["hypothesis"].tolist()[1] == "He left."


def test_canonical_jsonl_and_real_parquet():
    frame = load_task_set(FIXTURES / "mnli_canonical.jsonl")
    assert frame["id"].tolist() == ["10", "11", "12"] and frame["label"].tolist() == [0, 1, 2]
    matched = load_task_set(OFFLINE / "mnli" / "validation_matched.parquet")
    assert len(matched) == 9815 and list(matched.columns) == MNLI_COLUMNS
    assert set(matched["label"]) == {0, 1, 2}


def test_official_hans_tsv(tmp_path: Path):
    frame = load_hans(FIXTURES / "heuristics_evaluation_set.txt", tmp_path)
    assert frame["id"].tolist() == ["ex0", "ex1", "ex2"]
    assert frame["label"].tolist() == [1, 1, 0]
    assert frame["template"].tolist() == ["temp1", "temp11", "temp40"]
    assert frame["subcase"][0] == "ln_subject/object_swap"


def test_real_hans_parquet_has_30_subcases_of_1000(tmp_path: Path):
    frame = load_hans(OFFLINE / "hans" / "validation.parquet", tmp_path)
    assert len(frame) == 30000
    assert frame.groupby("subcase").size().eq(1000).all() and frame["subcase"].nunique() == 30
    assert frame["template"].notna().all() and frame["template"].nunique() == 60  # recovered
    assert set(frame["label"]) == {0, 1}


def test_hans_labels_by_name_and_number():
    base = {
        "premise": ["a", "b", "c"],
        "hypothesis": ["a", "b", "c"],
        "heuristic": ["lexical_overlap"] * 3,
        "subcase": ["ln_passive"] * 3,
        "template": ["temp20"] * 3,
    }
    frame = hans_examples(pd.DataFrame({**base, "label": ["entailment", 1, "0"]}), "t")
    assert frame["label"].tolist() == [0, 1, 0]


def hans_rows(heuristic: list[str], subcase: list[str]) -> pd.DataFrame:
    n = len(subcase)
    return pd.DataFrame(
        {
            "pairID": [f"ex{i}" for i in range(n)],
            "sentence1": ["a"] * n,
            "sentence2": ["b"] * n,
            "gold_label": ["non-entailment"] * n,
            "heuristic": heuristic,
            "subcase": subcase,
            "template": ["temp1"] * n,
        }
    )


def test_hans_subcase_under_two_heuristics_is_refused():
    frame = hans_rows(["lexical_overlap", "subsequence"], ["ln_passive", "ln_passive"])
    with pytest.raises(DataError, match="t: subcase 'ln_passive' lies in several heuristic") as e:
        hans_examples(frame, "t")
    assert "(lexical_overlap, subsequence)" in str(e.value) and "\n" not in str(e.value)


def test_unknown_hans_groups_are_refused():
    frame = hans_rows(["lexical_overlap"] * 2, ["ln_passive", "ln_made_up"])
    with pytest.raises(DataError, match="t: unknown subcase value\\(s\\) 'ln_made_up'") as e:
        hans_examples(frame, "t")
    assert "ln_subject/object_swap" in str(e.value)  # names the declared values
    frame = hans_rows(["lexical_overlap", "overlap"], ["ln_passive", "ln_passive"])
    with pytest.raises(DataError, match="unknown heuristic value\\(s\\) 'overlap'"):
        hans_examples(frame, "t")


def test_hans_without_a_group_column_or_its_values_is_refused():
    with pytest.raises(DataError, match="t: no column for subcase"):
        hans_examples(hans_rows(["lexical_overlap"], ["ln_passive"]).drop(columns="subcase"), "t")
    with pytest.raises(DataError, match="t: no column for template"):  # the noise's unit
        hans_examples(hans_rows(["lexical_overlap"], ["ln_passive"]).drop(columns="template"), "t")
    with pytest.raises(DataError, match="t: group 'subcase' has no values"):
        hans_examples(hans_rows(["lexical_overlap"], [""]), "t")


def test_a_multi_valued_group_is_checked_value_by_value():
    from seedvar.declared import Diagnostic, Group

    diagnostic = Diagnostic(
        source="unused.jsonl",
        labels=["entailment", "non-entailment"],
        groups={"tags": Group(split=";", values=["negation", "quantifiers"])},
        headline=["probe/tags"],
    )
    raw = pd.DataFrame(
        {"premise": ["a", "b", "c"], "hypothesis": ["a", "b", "c"], "label": [0, 1, 0]}
    )
    fine = canonical(
        raw.assign(tags=["negation;quantifiers", "", "negation"]),
        TASK.fields,
        TASK.text,
        diagnostic.labels,
        "t",
        {"tags": False},
    )
    assert fine["tags"].isna().tolist() == [False, True, False]  # "" is no value
    check_groups(fine, diagnostic, "t")
    bad = fine.assign(tags=["negation;quantifier", None, "negation"])
    with pytest.raises(DataError, match="t: unknown tags value\\(s\\) 'quantifier'"):
        check_groups(bad, diagnostic, "t")


def test_hans_url_download_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    served = (FIXTURES / "heuristics_evaluation_set.txt").read_bytes()
    calls = []

    class Response:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return served

    def fake_urlopen(url, timeout):
        calls.append(url)
        return Response()

    monkeypatch.setattr("urllib.request.urlopen", fake_urlopen)
    first = load_hans("https://example.org/hans.txt", tmp_path)
    second = load_hans("https://example.org/hans.txt", tmp_path)
    assert len(calls) == 1 and first.equals(second) and len(first) == 3


def test_hans_url_unreachable_names_offline_copy(tmp_path, monkeypatch):
    def unreachable(url, timeout):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr("urllib.request.urlopen", unreachable)
    with pytest.raises(DataError, match=r"--profile cpu, which reads data/offline/"):
        load_hans("https://example.org/hans.txt", tmp_path)


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("missing.parquet", None, "file not found"),
        ("mnli.xlsx", "premise,hypothesis,label\n", "unknown format '.xlsx'"),
        ("no_label.jsonl", '{"premise": "a", "hypothesis": "b"}\n', "no column for label"),
        (
            "bad_label.jsonl",
            '{"premise": "a", "hypothesis": "b", "label": "maybe"}\n',
            "unknown label value\\(s\\) 'maybe'",
        ),
        ("empty.tsv", "", "cannot be read|holds no examples"),
        ("header_only.tsv", "premise\thypothesis\tlabel\n", "holds no examples"),
        ("broken.jsonl", '{"premise": "a", "hyp', "cannot be read as JSONL"),
    ],
)
def test_bad_mnli_input_gives_one_clear_error(tmp_path: Path, name, content, problem):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=problem) as caught:
        load_task_set(path)
    assert str(path) in str(caught.value)


def test_truncated_parquet(tmp_path: Path):
    whole = (OFFLINE / "mnli" / "validation_matched.parquet").read_bytes()
    path = tmp_path / "truncated.parquet"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match="truncated"):
        read_table(path)


def test_hub_mnli_without_network_names_the_offline_data():
    """Real datasets hub call, in offline mode (the hub cannot be reached here anyway)."""
    code = (
        "from pathlib import Path; from seedvar.data.sources import read_source; "
        "read_source('hub:nyu-mll/glue:mnli:train', Path('downloads'))"
    )
    done = run_command(
        [sys.executable, "-c", code],
        env={
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
        },
        timeout=QUICK,
    )
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("seedvar.errors.")]
    assert line.startswith("seedvar.errors.DataError: ")  # one line: what, why, what to do
    assert (
        "cannot load hub:nyu-mll/glue:mnli:train from the Hugging Face hub: " in line
    )  # the source as declared, then the hub's own error
    assert "use an offline profile (--profile cpu, which reads data/offline/)" in line
    assert "data/offline/" in line


def test_subsample_is_fixed_and_stratified():
    frame = pd.DataFrame({"subcase": [c for c in "abc" for _ in range(10)], "v": range(30)})
    once, again = subsample(frame, 6, "subcase"), subsample(frame, 6, "subcase")
    assert once.equals(again) and once["subcase"].value_counts().to_dict() == dict(a=2, b=2, c=2)
    assert subsample(frame, None) is frame


def test_tokenization_is_cached_on_disk(tmp_path: Path):
    tokenizer = load_tokenizer("minilm-offline")
    frame = load_task_set(FIXTURES / "mnli_canonical.jsonl")
    first = tokenize_cached(frame, tokenizer, 32, tmp_path, TASK.text)
    entries = list((tmp_path / "tokenized").iterdir())
    second = tokenize_cached(frame, tokenizer, 32, tmp_path, TASK.text)
    assert len(entries) == 1 and list((tmp_path / "tokenized").iterdir()) == entries
    assert first["input_ids"] == second["input_ids"] and first["labels"] == [0, 1, 2]
    assert max(len(ids) for ids in first["input_ids"]) < 32  # stored unpadded
    tokenize_cached(frame, tokenizer, 16, tmp_path, TASK.text)
    assert len(list((tmp_path / "tokenized").iterdir())) == 2  # new max length, new entry
    assert fingerprint(frame) != fingerprint(frame.iloc[:2])


def test_batches_are_padded_to_their_longest_row():
    batch = PadToLongest(pad_token_id=0)(
        [
            {"input_ids": [101, 7, 102], "attention_mask": [1, 1, 1], "labels": 2},
            {"input_ids": [101, 102], "attention_mask": [1, 1], "labels": 0},
        ]
    )
    assert batch["input_ids"].tolist() == [[101, 7, 102], [101, 102, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [2, 0]


def test_length_grouped_batches_cover_every_row_once_with_less_padding():
    import random

    from seedvar.training.datamodule import SeededBatches

    lengths = [random.Random(i).randint(5, 120) for i in range(1000)]
    sampler = SeededBatches(lengths, batch_size=32, seed=7, group_by_length=True, window=10)
    epoch0 = list(sampler)
    assert sorted(i for batch in epoch0 for i in batch) == list(range(1000))
    assert len(epoch0) == len(sampler) == 32
    assert list(SeededBatches(lengths, 32, 7, True, window=10)) == epoch0  # seeded
    sampler.skip = 5
    assert list(sampler) == epoch0[5:] and list(sampler) == epoch0  # skips once, to resume
    plain = list(SeededBatches(lengths, 32, seed=7, group_by_length=False))
    assert sorted(i for batch in plain for i in batch) == list(range(1000)) and plain != epoch0
    sampler.set_epoch(1)
    assert list(sampler) != epoch0
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in epoch0)
    plain = [list(range(i, min(i + 32, 1000))) for i in range(0, 1000, 32)]
    padded_plain = sum(len(batch) * max(lengths[i] for i in batch) for batch in plain)
    assert padded < 0.7 * padded_plain
