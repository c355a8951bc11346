"""Hand-written open-ended prompts: writing tasks, general-knowledge questions and math word problems."""

from fractions import Fraction

# (prompt, max_tokens, checks) - writing has few sensible automatic checks; we add them only where the prompt
# pins something checkable (a required word, a format).
WRITING = [
    (
        "Write a short story (about 300 words) about a lighthouse keeper who finds a message in a bottle that was "
        "written by her own grandmother.",
        512,
        [],
    ),
    (
        "Write a polite email to a landlord asking for the broken heating to be repaired this week. Mention that it "
        "has been broken for six days.",
        300,
        [{"type": "contains", "value": "six days", "ignore_case": True}],
    ),
    ("Describe a busy night market in a coastal town using all five senses, in two paragraphs.", 400, []),
    (
        "Write a product description for a handmade ceramic coffee mug that holds 350 ml and is dishwasher safe.",
        250,
        [{"type": "contains", "value": "350", "name": "mentions capacity"}],
    ),
    ("Write a limerick about a cat who refuses to get off a laptop keyboard.", 120, []),
    (
        "Write a short speech (under 250 words) a team lead could give to thank colleagues after a difficult product "
        "launch.",
        380,
        [],
    ),
    ("Write a cover letter opening paragraph for a nurse applying to work in a children's hospital.", 220, []),
    ("Tell a bedtime story for a five-year-old about a snail who wants to see the sea.", 500, []),
    ("Write a haiku sequence of three haiku about the first snow of winter.", 120, []),
    (
        "Write a complaint to an airline about a lost suitcase, including the flight number NA 302.",
        320,
        [{"type": "contains", "value": "NA 302"}],
    ),
    ("Write the opening scene of a mystery novel set on a night train. Introduce at least two characters.", 600, []),
    (
        "Write a friendly message to a neighbor inviting them to a garden barbecue on Saturday at 4 pm.",
        200,
        [{"type": "regex", "pattern": r"saturday", "flags": "i", "name": "mentions Saturday"}],
    ),
    ("Write a persuasive paragraph arguing that every town should have a public tool library.", 300, []),
    ("Describe your ideal reading nook in about 150 words.", 260, []),
    ("Write a dialogue between a grandparent and a teenager about the first mobile phones.", 500, []),
    ("Write a two-sentence horror story set in a supermarket.", 90, []),
    ("Write a toast for a best friend's wedding that is funny but kind, about 200 words.", 340, []),
    (
        "Write a short poem about a train station at dawn, with the word 'platform' in the last line.",
        200,
        [{"type": "contains", "value": "platform", "ignore_case": True}],
    ),
    (
        "Write an out-of-office auto-reply for someone on holiday until 14 August, naming a colleague to contact.",
        160,
        [{"type": "contains", "value": "14 August", "ignore_case": True}],
    ),
    ("Write a short fable that ends with a moral about patience.", 400, []),
    ("Write a job advertisement for a part-time bicycle mechanic at a community repair shop.", 350, []),
    ("Write a travel diary entry from someone's first day in a mountain village with no cars.", 450, []),
    (
        "Write a thank-you note to a teacher from a parent whose child struggled with reading and now loves books.",
        250,
        [],
    ),
    ("Write a monologue for a museum guard on the last night before the museum closes forever.", 500, []),
    ("Write a short review of an imaginary restaurant that serves only soups.", 300, []),
    ("Write a science-fiction story opening in which the first message from aliens is a recipe.", 550, []),
    (
        "Write an apology email from a software company to customers after a six-hour outage.",
        350,
        [{"type": "regex", "pattern": r"six[- ]hour|6[- ]hour", "flags": "i", "name": "names the outage length"}],
    ),
    ("Describe an old wooden rowing boat to someone who has never seen one.", 260, []),
    ("Write instructions, in a warm tone, for a house sitter looking after two cats and a fern.", 400, []),
    ("Write a short story told entirely through a series of notes left on a shared fridge.", 500, []),
    ("Write a sonnet about debugging a program late at night.", 260, []),
    ("Write a tagline and a 50-word blurb for a board game about running a lighthouse.", 150, []),
]

# (question, max_tokens, a case-insensitive regex that any correct explanation matches: its key idea, in any of the
# words people use for it)
QA = [
    ("Why is the sky blue during the day but red at sunset?", 350, "scatter"),
    ("How does a vaccine train the immune system?", 400, "antibod|memory (b |t )?cells?"),
    ("What causes the seasons on Earth?", 300, "tilt"),
    ("Explain how a refrigerator keeps food cold.", 350, "refrigerant|coolant"),
    ("What is the difference between weather and climate?", 280, "average|long[- ]term"),
    ("How do bees make honey?", 320, "nectar"),
    ("Why does ice float on water?", 250, "dens"),
    ("What is photosynthesis and why does it matter?", 350, "carbon dioxide|co2|co₂"),
    ("How does a compass work?", 250, "magnet"),
    ("Explain what inflation is and one common way central banks try to control it.", 380, "interest rate"),
    ("What is the difference between a virus and a bacterium?", 350, "cell"),
    ("How do noise-cancelling headphones work?", 300, "phase|opposite|invert"),
    ("Why do we have leap years?", 250, "365|quarter|0?\\.25"),
    ("How does GPS figure out where you are?", 350, "satellite"),
    ("What is a black hole?", 320, "gravit"),
    ("Explain how hash tables achieve fast lookups.", 380, "hash(ing)? function|hash code|bucket"),
    ("What does DNA do in a cell?", 320, "protein"),
    ("Why do onions make people cry?", 250, "sulfur|sulphur|syn-propanethial"),
    ("How do airplanes stay in the air?", 350, "lift"),
    ("What is the greenhouse effect?", 320, "infrared|trap"),
    ("Why do cats purr?", 250, "vibrat"),
    ("How does a bicycle stay upright when it is moving?", 320, "steer|gyroscop"),
    ("What is the difference between RAM and disk storage in a computer?", 320, "volatile|power|persist"),
    ("How did the printing press change Europe?", 400, "gutenberg|movable type"),
    ("What is an index in a database and when would you add one?", 380, "quer|lookup|search"),
    ("Why does bread rise?", 260, "yeast"),
    ("How do tides work?", 300, "moon"),
    ("What is the Pythagorean theorem and what is it used for?", 300, "hypotenuse"),
    ("Explain what a recession is.", 300, "gdp|gross domestic product|economic activity"),
    ("How do solar panels turn sunlight into electricity?", 330, "photovoltaic|semiconductor|silicon"),
    ("Why is the ocean salty?", 280, "rock|mineral"),
    ("What does TCP do that UDP does not?", 320, "retransmi|resend|acknowledg"),
]

# Word problems: (template, parameter sets, answer function). Answers are computed here, never typed by hand.
_MATH = [
    (
        "A bakery sells muffins for ${p} each. Zoe buys {n} muffins and pays with a ${bill} note. How much change, in "
        "dollars, does she get?",
        [dict(p=3, n=4, bill=20), dict(p=2, n=7, bill=50)],
        lambda p, n, bill: bill - p * n,
    ),
    (
        "A train travels at {v} km/h for {h} hours and then at {v2} km/h for {h2} hours. How many kilometers does it "
        "travel in total?",
        [dict(v=80, h=2, v2=120, h2=3), dict(v=95, h=4, v2=60, h2=2)],
        lambda v, h, v2, h2: v * h + v2 * h2,
    ),
    (
        "A rectangular garden is {a} meters long and {b} meters wide. A path {w} meter wide runs all the way around "
        "the outside of it. What is the area of the path in square meters?",
        [dict(a=12, b=8, w=1), dict(a=20, b=15, w=2)],
        lambda a, b, w: (a + 2 * w) * (b + 2 * w) - a * b,
    ),
    (
        "Sam saves ${s} every week. He already has ${start}. After how many weeks will he have at least ${goal}?",
        [dict(s=15, start=40, goal=300), dict(s=25, start=110, goal=600)],
        lambda s, start, goal: -(-(goal - start) // s),
    ),
    (
        "A shirt costs ${p}. It is discounted by {d}% and then a {t}% sales tax is added to the discounted price. What "
        "is the final price in dollars?",
        [dict(p=40, d=25, t=10), dict(p=80, d=15, t=5)],
        lambda p, d, t: Fraction(p) * (100 - d) / 100 * (100 + t) / 100,
    ),
    (
        "A tank holds {c} liters. It is filled by a pipe that adds {f} liters per minute while a leak drains {d} "
        "liters per minute. Starting empty, how many minutes does it take to fill?",
        [dict(c=600, f=25, d=5), dict(c=1350, f=40, d=10)],
        lambda c, f, d: Fraction(c, f - d),
    ),
    (
        "There are {r} red, {g} green and {b} blue marbles in a bag. What percentage of the marbles are green?",
        [dict(r=12, g=18, b=30), dict(r=7, g=9, b=20)],
        lambda r, g, b: Fraction(100 * g, r + g + b),
    ),
    (
        "A printer prints {p} pages per minute. How many minutes does it take to print {n} copies of a {k}-page "
        "report?",
        [dict(p=24, n=30, k=16), dict(p=15, n=18, k=25)],
        lambda p, n, k: Fraction(n * k, p),
    ),
    (
        "Maya is {a} years old. Her father is {m} times her age. In how many years will her father be exactly twice "
        "her age?",
        [dict(a=8, m=4), dict(a=10, m=3)],
        lambda a, m: a * m - 2 * a,
    ),
    (
        "A recipe for {s} people needs {g} grams of flour. How many grams of flour are needed for {t} people?",
        [dict(s=4, g=300, t=10), dict(s=6, g=450, t=14)],
        lambda s, g, t: Fraction(g * t, s),
    ),
    (
        "A cyclist rides {d} km in {m} minutes. What is her average speed in km/h?",
        [dict(d=18, m=45), dict(d=33, m=90)],
        lambda d, m: Fraction(d * 60, m),
    ),
    (
        "A company has {e} employees. {p}% of them work remotely, and half of the remote workers live in another "
        "country. How many employees live in another country?",
        [dict(e=240, p=35), dict(e=560, p=25)],
        lambda e, p: Fraction(e * p, 200),
    ),
    (
        "The sum of three consecutive integers is {s}. What is the largest of them?",
        [dict(s=96), dict(s=255)],
        lambda s: s // 3 + 1,
    ),
    (
        "A phone plan costs ${base} per month plus ${per} for each gigabyte of data above {free} GB. Last month Ana "
        "used {used} GB. What was her bill in dollars?",
        [dict(base=12, per=3, free=5, used=11), dict(base=20, per=2, free=10, used=23)],
        lambda base, per, free, used: base + per * max(0, used - free),
    ),
    (
        "A ladder {ln} meters long leans against a wall with its foot {f} meters from the wall. How high up the wall "
        "does it reach, in meters?",
        [dict(ln=5, f=3), dict(ln=13, f=5)],
        lambda ln, f: round((ln * ln - f * f) ** 0.5),
    ),
    (
        "A library has {b} books. It buys {n} new books every month and gives away {g} old books every month. How "
        "many books will it have after {m} months?",
        [dict(b=1200, n=45, g=20, m=12), dict(b=5400, n=80, g=95, m=6)],
        lambda b, n, g, m: b + (n - g) * m,
    ),
]


def math_items() -> list[tuple[str, int | float, str]]:
    """(problem, answer, answer as text) for every template and parameter set, in order."""
    out = []
    for template, params, answer in _MATH:
        for p in params:
            value = Fraction(answer(**p))
            if value.denominator == 1:
                shown = str(value.numerator)
            else:
                # Only two-decimal answers are used; we keep them exact and show them like a person would.
                assert (value * 100).denominator == 1, (template, p, value)
                shown = f"{float(value):.2f}"
            out.append((template.format(**p), value, shown))
    return out
