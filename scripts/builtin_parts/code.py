"""Hand-written Python snippets and edit instructions for the code-edit set (original code).

Each snippet has 2-4 edits. An edit is (instruction, checks): checks are loose signals that the edit was made
(a new name appears, an old one is gone, a signature changed), not proof of correctness; both arms of an A/B run
get the same checks, so a difference in pass rate is what matters.
"""


def renamed(old: str, new: str, kind: str = "def") -> list[dict]:
    return [
        {"type": "regex", "pattern": rf"{kind} {new}\b", "name": f"{kind} {new} present"},
        {"type": "regex", "pattern": rf"{kind} {old}\b", "negate": True, "name": f"{kind} {old} gone"},
    ]


def has(text: str, name: str | None = None) -> dict:
    return {"type": "contains", "value": text, "name": name or f"contains {text}"}


def rx(pattern: str, name: str, flags: str = "") -> dict:
    d = {"type": "regex", "pattern": pattern, "name": name}
    if flags:
        d["flags"] = flags
    return d


SNIPPETS = [
    {
        "code": '''def parse_duration(text):
    """Parse strings like '1h30m', '45s' or '2h' into a number of seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    total = 0
    number = ""
    for ch in text.strip():
        if ch.isdigit():
            number += ch
        elif ch in units:
            if not number:
                raise ValueError(f"missing number before {ch!r} in {text!r}")
            total += int(number) * units[ch]
            number = ""
        else:
            raise ValueError(f"unexpected character {ch!r} in {text!r}")
    if number:
        raise ValueError(f"trailing number without a unit in {text!r}")
    return total
''',
        "edits": [
            (
                "Rename the function to `duration_to_seconds` and update its docstring accordingly.",
                renamed("parse_duration", "duration_to_seconds"),
            ),
            ("Add support for a 'd' unit meaning days (86400 seconds).", [rx(r"[\"']d[\"']\s*:\s*86400", "d unit")]),
            (
                "Add type hints to the function signature and to the local variables where they help.",
                [rx(r"def parse_duration\(text:\s*str\)\s*->\s*int", "typed signature")],
            ),
        ],
    },
    {
        "code": """from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = OrderedDict()

    def get(self, key, default=None):
        if key not in self.items:
            return default
        self.items.move_to_end(key)
        return self.items[key]

    def put(self, key, value):
        self.items[key] = value
        self.items.move_to_end(key)
        if len(self.items) > self.capacity:
            self.items.popitem(last=False)

    def __len__(self):
        return len(self.items)
""",
        "edits": [
            (
                "Rename the class to `RecentlyUsedCache` and the method `put` to `set`.",
                renamed("LRUCache", "RecentlyUsedCache", "class") + renamed("put", "set"),
            ),
            (
                "Add `hits` and `misses` counters that `get` updates, and a `stats()` method returning them as a dict.",
                [
                    rx(r"self\.hits\s*\+=\s*1", "hits counted"),
                    rx(r"self\.misses\s*\+=\s*1", "misses counted"),
                    rx(r"def stats\(self", "stats method"),
                ],
            ),
            (
                "Raise a ValueError in the constructor when capacity is not a positive integer.",
                [has("ValueError"), rx(r"capacity\s*(<=|<)\s*[01]|not\s+isinstance\(capacity", "capacity validated")],
            ),
        ],
    },
    {
        "code": """def chunk(items, size):
    for start in range(0, len(items), size):
        yield items[start:start + size]
""",
        "edits": [
            (
                "Add a docstring and type hints, and make it raise ValueError if size is less than 1.",
                [has("ValueError"), rx(r"def chunk\([^)]*:[^)]*\)\s*->", "typed signature"), has('"""', "docstring")],
            ),
            (
                "Rename the function to `batched` and its parameter `size` to `batch_size`.",
                [*renamed("chunk", "batched"), rx(r"def batched\([^)]*batch_size", "parameter renamed")],
            ),
        ],
    },
    {
        "code": '''def merge_intervals(intervals):
    """Merge overlapping [start, end] intervals and return them sorted."""
    if not intervals:
        return []
    ordered = sorted(intervals)
    merged = [list(ordered[0])]
    for start, end in ordered[1:]:
        last = merged[-1]
        if start < last[1]:
            last[1] = max(last[1], end)
        else:
            merged.append([start, end])
    return merged
''',
        "edits": [
            (
                "There is a bug: intervals that touch, such as [1, 3] and [3, 5], are not merged. Fix it.",
                [rx(r"start\s*<=\s*last\[1\]|last\[1\]\s*>=\s*start", "touching intervals merge")],
            ),
            (
                "Rename `merge_intervals` to `coalesce_ranges` and return a list of tuples instead of lists.",
                [*renamed("merge_intervals", "coalesce_ranges"), has("tuple", "returns tuples")],
            ),
            (
                "Add a keyword-only parameter `gap=0`: intervals separated by at most `gap` should also be merged.",
                [rx(r"def merge_intervals\([^)]*\*[^)]*gap\s*(:\s*\w+\s*)?=\s*0", "keyword-only gap")],
            ),
        ],
    },
    {
        "code": """import datetime


class BankAccount:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance
        self.history = []

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self.balance += amount
        self.history.append(("deposit", amount, datetime.datetime.now()))

    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("withdrawal must be positive")
        self.balance -= amount
        self.history.append(("withdraw", amount, datetime.datetime.now()))

    def statement(self):
        lines = [f"Account of {self.owner}"]
        for kind, amount, when in self.history:
            lines.append(f"{when:%Y-%m-%d %H:%M}  {kind:<8} {amount:>10.2f}")
        lines.append(f"Balance: {self.balance:.2f}")
        return "\\n".join(lines)
""",
        "edits": [
            (
                "`withdraw` lets the balance go negative. Make it raise `InsufficientFunds` (define that exception "
                "class) when the amount exceeds the balance.",
                [rx(r"class InsufficientFunds\(", "exception defined"), rx(r"raise InsufficientFunds", "raised")],
            ),
            (
                "Inject the clock: add a `clock` parameter to `__init__` (default `datetime.datetime.now`) and use it "
                "instead of calling `datetime.datetime.now()` directly.",
                [
                    rx(r"def __init__\(self[^)]*clock", "clock parameter"),
                    rx(r"self\.clock\(\)|self\._clock\(\)", "clock used"),
                ],
            ),
            (
                "Rename the attribute `history` to `transactions` everywhere.",
                [
                    has("self.transactions"),
                    {"type": "contains", "value": "self.history", "negate": True, "name": "history gone"},
                ],
            ),
            (
                "Add a `transfer(self, other, amount)` method that withdraws from this account and deposits into "
                "`other`.",
                [rx(r"def transfer\(self,\s*other,\s*amount", "transfer method")],
            ),
        ],
    },
    {
        "code": """import re
from collections import Counter


def word_frequencies(path, top=10):
    with open(path) as f:
        text = f.read().lower()
    words = re.findall(r"[a-z']+", text)
    counts = Counter(words)
    return counts.most_common(top)
""",
        "edits": [
            (
                "Add a `stopwords` parameter (an optional set of words to ignore) and skip those words when counting.",
                [rx(r"def word_frequencies\([^)]*stopwords", "stopwords parameter")],
            ),
            (
                "Open the file with an explicit UTF-8 encoding and add type hints.",
                [
                    rx(r"encoding\s*=\s*[\"']utf-?8[\"']", "utf-8 encoding", "i"),
                    rx(r"\)\s*->\s*(list|List)\b", "return type"),
                ],
            ),
            (
                "Rename the function to `top_words` and the parameter `top` to `limit`.",
                [*renamed("word_frequencies", "top_words"), rx(r"def top_words\([^)]*limit", "limit parameter")],
            ),
        ],
    },
    {
        "code": '''import time


def retry(fn, attempts=3, delay=1.0):
    """Call fn() until it succeeds, up to `attempts` times, sleeping `delay` seconds between tries."""
    last_error = None
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as e:
            last_error = e
            time.sleep(delay)
    raise last_error
''',
        "edits": [
            (
                "Add exponential backoff: a `backoff` parameter (default 2.0) multiplies the delay after each failure.",
                [
                    rx(r"def retry\([^)]*backoff\s*(:\s*float\s*)?=\s*2\.0", "backoff parameter"),
                    rx(r"\*=\s*backoff|\*\s*backoff", "delay multiplied"),
                ],
            ),
            (
                "Don't sleep after the last failed attempt, and only retry on the exception types given in a new "
                "`retry_on` parameter (a tuple, default `(Exception,)`).",
                [rx(r"retry_on\s*(:[^=]+)?=\s*\(Exception,\)", "retry_on parameter"), rx(r"except retry_on", "used")],
            ),
            (
                "Rename `fn` to `operation` and add type hints using a TypeVar for the return type.",
                [has("TypeVar"), rx(r"def retry\(operation", "parameter renamed")],
            ),
        ],
    },
    {
        "code": '''def moving_average(values, window):
    """Return the simple moving averages of `values` over `window` consecutive items."""
    if window <= 0:
        raise ValueError("window must be positive")
    averages = []
    for i in range(len(values) - window):
        segment = values[i:i + window]
        averages.append(sum(segment) / window)
    return averages
''',
        "edits": [
            (
                "This skips the last window: moving_average([1, 2, 3], 3) returns [] instead of [2.0]. Fix the bug.",
                [
                    rx(
                        r"len\(values\)\s*-\s*window\s*\+\s*1|range\(window,\s*len\(values\)\s*\+\s*1",
                        "last window kept",
                    )
                ],
            ),
            (
                "Make it run in O(n) time with a running sum instead of summing each window again.",
                [rx(r"\+=|-=", "running sum")],
            ),
        ],
    },
    {
        "code": """from dataclasses import dataclass, field


@dataclass
class Item:
    sku: str
    name: str
    unit_price: float
    quantity: int = 0


@dataclass
class Inventory:
    items: dict = field(default_factory=dict)

    def add(self, sku, name, unit_price, quantity=1):
        if sku in self.items:
            self.items[sku].quantity += quantity
        else:
            self.items[sku] = Item(sku, name, unit_price, quantity)

    def remove(self, sku, quantity=1):
        item = self.items[sku]
        if quantity > item.quantity:
            raise ValueError(f"only {item.quantity} of {sku} in stock")
        item.quantity -= quantity
        if item.quantity == 0:
            del self.items[sku]

    def total_value(self):
        return sum(i.unit_price * i.quantity for i in self.items.values())

    def low_stock(self, threshold=5):
        return [i for i in self.items.values() if i.quantity < threshold]
""",
        "edits": [
            (
                "Store prices as integer cents instead of floats: rename `unit_price` to `unit_price_cents` "
                "(an int) everywhere.",
                [has("unit_price_cents"), rx(r"unit_price_cents:\s*int", "int cents")],
            ),
            (
                "Make `Item` a frozen dataclass and update `Inventory` so it replaces items instead of mutating them.",
                [rx(r"@dataclass\(frozen=True", "frozen"), has("replace(", "uses replace")],
            ),
            (
                "`remove` raises a bare KeyError for unknown SKUs. Raise a ValueError with a clear message instead.",
                [rx(r"if sku not in self\.items|except KeyError", "unknown sku handled"), has("ValueError")],
            ),
        ],
    },
    {
        "code": """import re
import unicodedata


def slugify(title):
    normalized = unicodedata.normalize("NFKD", title)
    ascii_only = normalized.encode("ascii", "ignore").decode("ascii")
    lowered = ascii_only.lower()
    dashed = re.sub(r"[^a-z0-9]+", "-", lowered)
    return dashed.strip("-")
""",
        "edits": [
            (
                "Add a `max_length` parameter (default 60) that truncates the slug without leaving a trailing dash.",
                [rx(r"def slugify\([^)]*max_length\s*(:\s*int\s*)?=\s*60", "max_length parameter")],
            ),
            (
                'Add a `separator` parameter (default "-") used instead of the dash, and type hints.',
                [rx(r"def slugify\([^)]*separator", "separator parameter"), rx(r"->\s*str", "return type")],
            ),
        ],
    },
    {
        "code": '''def load_config(path):
    """Read a simple config file of `key = value` lines. Lines starting with # are comments."""
    config = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, value = line.split("=")
            key = key.strip()
            value = value.strip()
            if value.lower() in ("true", "false"):
                value = value.lower() == "true"
            elif value.isdigit():
                value = int(value)
            config[key] = value
    return config
''',
        "edits": [
            (
                "Values that contain '=' (like `url = http://x/?a=b`) crash this function. Fix it.",
                [rx(r"split\(\s*[\"']=[\"']\s*,\s*1\s*\)|partition\(\s*[\"']=[\"']\s*\)", "split once")],
            ),
            (
                "Report malformed lines with a ValueError that includes the file name and line number.",
                [has("ValueError"), has("enumerate(", "line numbers tracked")],
            ),
            (
                "Rename the function to `read_settings` and make it accept an optional `defaults` dict that is "
                "merged under the file's values.",
                [*renamed("load_config", "read_settings"), rx(r"def read_settings\([^)]*defaults", "defaults")],
            ),
        ],
    },
    {
        "code": '''import time


class RateLimiter:
    """Token bucket: allows `rate` requests per second with bursts of up to `capacity`."""

    def __init__(self, rate, capacity):
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.updated = time.monotonic()

    def _refill(self):
        now = time.monotonic()
        elapsed = now - self.updated
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self.updated = now

    def try_acquire(self, cost=1):
        self._refill()
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False

    def wait_time(self, cost=1):
        self._refill()
        missing = cost - self.tokens
        return max(0.0, missing / self.rate)
''',
        "edits": [
            (
                "Inject the clock: accept a `clock` callable in `__init__` (default `time.monotonic`) so tests can "
                "control time.",
                [rx(r"def __init__\(self[^)]*clock", "clock parameter"), rx(r"self\.(_)?clock\(\)", "clock used")],
            ),
            (
                "Rename the class to `TokenBucket` and `try_acquire` to `consume`.",
                renamed("RateLimiter", "TokenBucket", "class") + renamed("try_acquire", "consume"),
            ),
            (
                "Add an async method `acquire(self, cost=1)` that sleeps with asyncio until enough tokens are "
                "available.",
                [rx(r"async def acquire\(self", "async acquire"), has("asyncio.sleep")],
            ),
        ],
    },
    {
        "code": '''def binary_search(xs, target):
    """Return the index of target in the sorted list xs, or -1 if it is absent."""
    lo, hi = 0, len(xs)
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] == target:
            return mid
        if xs[mid] < target:
            lo = mid
        else:
            hi = mid
    return -1
''',
        "edits": [
            (
                "This function loops forever for some inputs, e.g. binary_search([1, 3], 5). Fix the bug.",
                [rx(r"lo\s*=\s*mid\s*\+\s*1", "lo advances past mid")],
            ),
            (
                "Add a `key` parameter (a function applied to elements before comparing), like `sorted` has.",
                [rx(r"def binary_search\([^)]*key", "key parameter")],
            ),
        ],
    },
    {
        "code": '''def format_table(rows, headers):
    """Render rows (lists of values) as a plain-text table with a header line."""
    columns = list(zip(headers, *rows))
    widths = [max(len(str(v)) for v in col) for col in columns]
    lines = []
    header = " | ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    lines.append(header)
    lines.append("-+-".join("-" * w for w in widths))
    for row in rows:
        cells = []
        for value, width in zip(row, widths):
            if isinstance(value, (int, float)):
                cells.append(str(value).rjust(width))
            else:
                cells.append(str(value).ljust(width))
        lines.append(" | ".join(cells))
    return "\\n".join(lines)
''',
        "edits": [
            (
                "Format floats with a fixed number of decimals given by a new `decimals` parameter (default 2).",
                [rx(r"def format_table\([^)]*decimals\s*(:\s*int\s*)?=\s*2", "decimals parameter")],
            ),
            (
                "Rename `format_table` to `render_table` and add type hints and a docstring example.",
                [*renamed("format_table", "render_table"), rx(r"->\s*str", "return type")],
            ),
            (
                "Raise a ValueError when a row has a different number of values than there are headers.",
                [has("ValueError"), rx(r"len\(row\)\s*!=\s*len\(headers\)", "row length checked")],
            ),
        ],
    },
]

TEMPLATES = [
    "Here is some Python code:\n\n```python\n{code}```\n\n{instruction} Reply with the complete updated code in a "
    "single ```python block.",
    "{instruction}\n\n```python\n{code}```\n\nReturn the whole modified code, not just the changed lines.",
    "Edit the following code. {instruction} Keep everything else unchanged and output the full result.\n\n"
    "```python\n{code}```",
]
