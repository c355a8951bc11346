"""Compose the built-in workload sets from the hand-written parts in scripts/builtin_parts/ (data files: JSON, and the
code-edit snippets as plain text in code.txt).

    python scripts/make_builtin_workloads.py          # rewrites src/speculab/harness/workload/data/*.jsonl
    python scripts/make_builtin_workloads.py --check  # exit 1 if the committed files differ from a fresh build

The output is deterministic (no randomness: every choice is a function of the item's position), and it is
committed; the loader never runs this script. Bump BUILTIN_VERSION in speculab/harness/workload/builtin.py whenever the
output changes, so that results record which prompts they were measured on.
"""

from __future__ import annotations

import argparse
import json
import re
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = HERE / "builtin_parts"
OUT = HERE.parent / "src" / "speculab" / "harness" / "workload" / "data"


def read_part(name: str) -> dict:
    return json.loads((PARTS / f"{name}.json").read_text(encoding="utf-8"))


def read_code() -> tuple[list[dict], list[str]]:
    """(snippets, templates): each snippet's code from its `=== name` section of code.txt, its edits from code.json
    as (instruction, checks)."""
    part = read_part("code")
    sections = re.split(r"^=== (\w+)\n", (PARTS / "code.txt").read_text(encoding="utf-8"), flags=re.M)
    assert sections[0] == "", "code.txt starts with a section line"
    code = dict(zip(sections[1::2], sections[2::2], strict=True))
    assert list(code) == [s["name"] for s in part["snippets"]], "code.txt's sections are code.json's snippets, in order"
    snippets = [
        {"code": code[s["name"]], "edits": [(e["instruction"], e["checks"]) for e in s["edits"]]}
        for s in part["snippets"]
    ]
    return snippets, part["templates"]


def read_extraction() -> tuple[list[dict], list[str]]:
    """(records, instructions), each record's document joined from its lines."""
    part = read_part("extraction")
    return [{**r, "doc": "\n".join(r["doc"])} for r in part["records"]], part["instructions"]


def read_passages() -> list[dict]:
    """The passages, each text joined from its paragraphs."""
    passages = read_part("passages")["passages"]
    return [
        {**{k: v for k, v in p.items() if k != "paragraphs"}, "text": "\n\n".join(p["paragraphs"])} for p in passages
    ]


# The math answers are formulas of the parameters, computed here and never typed by hand; they are this repository's
# own text, evaluated with no builtins but the three they use.
FORMULA_NAMES = {"__builtins__": {}, "Fraction": Fraction, "max": max, "round": round}


def math_items() -> list[tuple[str, Fraction, str]]:
    """(problem, answer, answer as text) for every template and parameter set, in order."""
    out = []
    for problem in read_part("open_ended")["math"]:
        template = problem["template"]
        for p in problem["params"]:
            value = Fraction(eval(problem["answer"], FORMULA_NAMES, dict(p)))
            if value.denominator == 1:
                shown = str(value.numerator)
            else:
                # Only two-decimal answers are used; we keep them exact and show them like a person would.
                assert (value * 100).denominator == 1, (template, p, value)
                shown = f"{float(value):.2f}"
            out.append((template.format(**p), value, shown))
    return out


SNIPPETS, TEMPLATES = read_code()
RECORDS, INSTRUCTIONS = read_extraction()
PASSAGES = read_passages()
WRITING = [(w["prompt"], w["max_tokens"], w["checks"]) for w in read_part("open_ended")["writing"]]
QA = [(q["question"], q["max_tokens"], q["key_idea"]) for q in read_part("open_ended")["qa"]]


def approx_tokens(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


def interleave(groups: list[list[dict]]) -> list[dict]:
    """Round-robin over groups so that any prefix of the set covers many different sources."""
    out = []
    for i in range(max(len(g) for g in groups)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def code_edit() -> list[dict]:
    groups = []
    for s, snip in enumerate(SNIPPETS):
        group = []
        for e, (instruction, checks) in enumerate(snip["edits"]):
            template = TEMPLATES[(s + e) % len(TEMPLATES)]
            prompt = template.format(code=snip["code"], instruction=instruction)
            # The natural answer rewrites the whole snippet: allow its length plus room for the change.
            max_tokens = int(approx_tokens(snip["code"]) * 1.3) + 96
            group.append({"category": "code-edit", "prompt": prompt, "max_tokens": max_tokens, "checks": checks})
        groups.append(group)
    return interleave(groups)


def extraction_items() -> list[dict]:
    items = []
    for r, rec in enumerate(RECORDS):
        keys = list(rec["fields"])
        properties = {}
        for k, schema in rec["fields"].items():
            prop = dict(schema)
            if k in rec["expect"]:
                prop["const"] = rec["expect"][k]
            n = rec.get("list_len", {}).get(k)
            if n is not None:
                prop["minItems"] = prop["maxItems"] = n
            properties[k] = prop
        schema = {"type": "object", "required": keys, "properties": properties}
        instruction = INSTRUCTIONS[r % len(INSTRUCTIONS)].format(keys=", ".join(keys))
        if "instruction_extra" in rec:
            instruction += " " + rec["instruction_extra"]
        prompt = f"{instruction}\n\nText:\n{rec['doc']}" if r % 2 == 0 else f"{rec['doc']}\n\n---\n{instruction}"
        items.append(
            {
                "category": "extraction",
                "prompt": prompt,
                "max_tokens": 60 + 28 * len(keys),
                "checks": [{"type": "json_schema", "name": "fields", "schema": schema}],
            }
        )
    return items


JSON_RECORDS = 24  # builtin:json: the first records, each asked for through a response_format's JSON schema
JSON_INSTRUCTION = (
    "Extract the fields {keys} from the text below. Reply with one JSON object and nothing else. Dates are "
    "YYYY-MM-DD; numbers are plain JSON numbers."
)


def json_items() -> list[dict]:
    """Structured outputs: each record's fields asked for with `response_format` (a JSON schema of the fields' shapes,
    no other keys; its validity is judged per arm), and a check of the values (the extraction set's `const`s)."""
    items = []
    for rec in RECORDS[:JSON_RECORDS]:
        keys = list(rec["fields"])
        shape = {}
        for k, schema in rec["fields"].items():
            n = rec.get("list_len", {}).get(k)
            shape[k] = {**schema, **({"minItems": n, "maxItems": n} if n is not None else {})}
        schema = {"type": "object", "properties": shape, "required": keys, "additionalProperties": False}
        values = {k: {"const": v} for k, v in rec["expect"].items()}
        items.append(
            {
                "category": "json",
                "prompt": f"{JSON_INSTRUCTION.format(keys=', '.join(keys))}\n\nText:\n{rec['doc']}",
                "max_tokens": 60 + 28 * len(keys),
                "response_format": {"type": "json_schema", "json_schema": {"name": "record", "schema": schema}},
                "checks": [
                    {
                        "type": "json_schema",
                        "name": "values",
                        "schema": {"required": list(values), "properties": values},
                    }
                ],
            }
        )
    return items


SUMMARIZE_TASKS = [
    ("Summarize the following passage in three bullet points.", 180),
    ("Write a one-paragraph summary of this text in under 80 words.", 150),
    ("Rewrite this passage in plain language that a ten-year-old could follow, keeping every fact.", 420),
    ("Rewrite the passage in a more formal tone. Keep all names, numbers and dates exactly as they are.", 460),
    ("Turn this passage into a short FAQ with three questions and their answers.", 360),
    ("Give this text a headline, then summarize it in two sentences.", 150),
    ("Rewrite the passage as a short notice for a community newsletter, keeping the key facts and numbers.", 420),
]


def summarize_items() -> list[dict]:
    items = []
    for i, p in enumerate(PASSAGES):
        task, max_tokens = SUMMARIZE_TASKS[i % len(SUMMARIZE_TASKS)]
        if task.startswith("Rewrite"):  # a rewrite is about as long as the passage: leave room for all of it
            max_tokens = max(max_tokens, int(approx_tokens(p["text"]) * 1.4))
        body = f"{p['title']}\n\n{p['text']}" if i % 3 else p["text"]
        prompt = f"{task}\n\n{body}" if i % 2 == 0 else f"{body}\n\n{task}"
        checks = [{"type": "contains", "value": p["key"], "ignore_case": True, "name": "keeps the subject"}]
        items.append({"category": "summarize", "prompt": prompt, "max_tokens": max_tokens, "checks": checks})
    return items


RAG_INSTRUCTION = (
    "Answer the question using only the documents below. First quote the sentence that contains the answer and "
    "say which document it is from, then give the answer in a few words. If the documents do not contain the "
    "answer, say so."
)


def answer_check(p: dict) -> dict:
    if "answer_pattern" in p:
        return {"type": "regex", "pattern": p["answer_pattern"], "flags": "is", "name": "answer"}
    return {"type": "contains", "value": p["answer"], "ignore_case": True, "name": "answer"}


def rag_items() -> list[dict]:
    items = []
    n = len(PASSAGES)
    for i, p in enumerate(PASSAGES):
        n_docs = 2 + i % 3  # 2, 3 or 4 documents: varied prompt lengths
        others = [PASSAGES[(i + 7 * k) % n] for k in range(1, n_docs)]
        pos = i % n_docs  # where the document with the answer sits
        docs = [*others[:pos], p, *others[pos:]]
        context = "\n\n".join(f"Document [{k + 1}] {d['title']}\n{d['text']}" for k, d in enumerate(docs))
        prompt = f"{RAG_INSTRUCTION}\n\n{context}\n\nQuestion: {p['question']}"
        checks = [
            answer_check(p),
            {
                "type": "regex",
                "pattern": rf"(document|doc\.?)\s*\[?{pos + 1}\]?(?!\d)",
                "flags": "i",
                "name": "cites the document",
            },
        ]
        items.append({"category": "rag-qa", "prompt": prompt, "max_tokens": 200, "checks": checks})
    return items


def writing_items() -> list[dict]:
    return [{"category": "writing", "prompt": q, "max_tokens": m, "checks": c} for q, m, c in WRITING]


def qa_items() -> list[dict]:
    items = []
    for q, m, pattern in QA:
        checks = [{"type": "regex", "pattern": pattern, "flags": "i", "name": "key idea"}]
        items.append({"category": "qa", "prompt": q, "max_tokens": m, "checks": checks})
    return items


def number_pattern(value: Fraction, shown: str) -> str:
    """Regex for a number as people write it: optional thousands commas, optional trailing zeros."""
    whole, _, frac = shown.partition(".")
    digits = whole.lstrip("-")
    groups = []
    while digits:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    body = ",?".join(groups)
    frac = frac.rstrip("0")
    tail = rf"\.{frac}0*" if frac else r"(?:\.0+)?"
    sign = "-" if value < 0 else ""
    return rf"{sign}{body}{tail}(?![.,]?\d)"


def math_items_out() -> list[dict]:
    items = []
    for problem, value, shown in math_items():
        prompt = f"{problem}\nShow your working, then give the final answer on its own line as 'Answer: <number>'."
        checks = [
            {
                "type": "regex",
                "name": f"answer {shown}",
                "pattern": r"answer\W{0,4}\s*[$€£]?\s*" + number_pattern(value, shown),
                "flags": "i",
            }
        ]
        items.append({"category": "math", "prompt": prompt, "max_tokens": 320, "checks": checks})
    return items


def long_items() -> list[dict]:
    """Prompts that ask for long answers, each with the max_tokens its answer is expected to reach (long.json)."""
    return [
        {"category": "long", "prompt": p["prompt"], "max_tokens": p["max_tokens"]} for p in read_part("long")["prompts"]
    ]


CHAT_CONVERSATIONS = 6  # per kind: code, document, writing


def _follow_up(instruction: str) -> str:
    return f"Now, starting from your version, {instruction[0].lower()}{instruction[1:]} Show the complete updated code."


def chat_items() -> list[dict]:
    """Multi-turn conversations (`turns`): each later turn builds on the answer before it, so the answer so far is
    context the next one reuses (code revised twice, a document summarised then questioned, a text rewritten)."""
    code_convs, doc_convs, writing_convs = [], [], []
    for s, snip in enumerate(SNIPPETS[:CHAT_CONVERSATIONS]):
        edits = snip["edits"][:3]
        template = TEMPLATES[s % len(TEMPLATES)]
        turns = [template.format(code=snip["code"], instruction=edits[0][0])]
        turns += [_follow_up(instruction) for instruction, _ in edits[1:]]
        max_tokens = int(approx_tokens(snip["code"]) * 1.3) + 96
        code_convs.append({"category": "chat-code", "turns": turns, "max_tokens": max_tokens, "checks": edits[-1][1]})
    for p in PASSAGES[:CHAT_CONVERSATIONS]:
        turns = [
            f"Read this document and summarize it in three sentences.\n\n{p['title']}\n{p['text']}",
            f"Using only the document, answer: {p['question']} Quote the sentence that contains the answer.",
        ]
        doc_convs.append({"category": "chat-document", "turns": turns, "max_tokens": 200, "checks": [answer_check(p)]})
    for q, m, _ in WRITING[:CHAT_CONVERSATIONS]:
        turns = [q, "Now rewrite your answer in about half the length, keeping the same names and key details."]
        writing_convs.append({"category": "chat-writing", "turns": turns, "max_tokens": m})
    return interleave([code_convs, doc_convs, writing_convs])


SETS = {
    "code-edit": code_edit,
    "extraction": extraction_items,
    "summarize": summarize_items,
    "rag-qa": rag_items,
    "writing": writing_items,
    "qa": qa_items,
    "math": math_items_out,
    "chat": chat_items,
    "long": long_items,
    "json": json_items,
}


def build() -> dict[str, str]:
    for p in PASSAGES:  # every rag answer must be in its passage, verbatim
        assert p["answer"].lower() in p["text"].lower(), p["title"]
        assert p["key"].lower() in p["text"].lower(), p["title"]
        assert re.search(p.get("answer_pattern", re.escape(p["answer"])), p["text"], re.I | re.S), p["title"]
        words = len(p["text"].split())
        assert 150 <= words <= 300, (p["title"], words)
    files = {}
    for name, make in SETS.items():
        lines = []
        for i, item in enumerate(make()):
            obj = {"id": f"{name}-{i:03d}", **item}
            if not obj.get("checks"):
                obj.pop("checks", None)
            lines.append(json.dumps(obj, ensure_ascii=False))
        files[name] = "\n".join(lines) + "\n"
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = ap.parse_args()
    files = build()
    stale = []
    for name, text in files.items():
        path = OUT / f"{name}.jsonl"
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"{path.relative_to(HERE.parent)}: {text.count(chr(10))} items, {len(text.encode()) // 1024} KiB")
    if stale:
        print(f"stale built-in sets: {', '.join(stale)}; run python scripts/make_builtin_workloads.py")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
