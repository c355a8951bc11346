import pytest

from speculab.errors import UserError
from speculab.harness.client.token_counter import load_token_counter


def test_counts_with_a_local_tokenizer_json(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = tokenizers.Tokenizer(WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    count = load_token_counter(str(tmp_path))  # a directory holding tokenizer.json
    assert count("hello world foo") == 3
    assert load_token_counter(str(tmp_path / "tokenizer.json"))("hello") == 1


def test_missing_or_broken(tmp_path):
    with pytest.raises(UserError, match=r"no tokenizer\.json"):
        load_token_counter(str(tmp_path))
    (tmp_path / "tokenizer.json").write_text("{not a tokenizer")
    with pytest.raises(UserError, match="cannot load"):
        load_token_counter(str(tmp_path))
