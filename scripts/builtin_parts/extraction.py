"""Hand-written documents with known field values for the extraction set (original text).

Each record: a document, the fields to extract (name -> JSON Schema of the value), and the expected values of the
unambiguous fields (ids and numbers), which become `const` constraints in the item's json_schema check.
"""

S = {"type": "string", "minLength": 1}
N = {"type": "number"}
INT = {"type": "integer"}
B = {"type": "boolean"}
DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
LIST = {"type": "array", "items": {"type": "string"}, "minItems": 1}

RECORDS = [
    {
        "doc": """From: accounts@brisbyprint.example
Subject: Invoice BP-20931 for your October order

Hello Martin,

Please find attached invoice BP-20931 for the 500 tri-fold brochures and 2 pull-up banners delivered on 14 October.
The total comes to 1,284.50 EUR including VAT. Payment is due by 13 November 2024 by bank transfer to the account
shown on the invoice. If you have already paid, please ignore this message.

Kind regards,
Saskia van Dam
Brisby Print & Design""",
        "fields": {"invoice_number": S, "vendor": S, "total": N, "currency": S, "due_date": DATE},
        "expect": {"invoice_number": "BP-20931", "total": 1284.5, "currency": "EUR", "due_date": "2024-11-13"},
    },
    {
        "doc": """Invoice no. 7781-C issued by Hollow Oak Landscaping to R. Delacroix, 22 Fern Rise.
Services: spring cleanup (6 hours), hedge trimming, removal of green waste (1 load).
Amount due: $645.00 USD. Terms: net 30 from the invoice date of March 3, 2025, so payment is due April 2, 2025.
Thank you for your business!""",
        "fields": {"invoice_number": S, "vendor": S, "total": N, "currency": S, "due_date": DATE},
        "expect": {"invoice_number": "7781-C", "total": 645, "currency": "USD", "due_date": "2025-04-02"},
    },
    {
        "doc": """Senior Data Engineer - Tallis Freight (Leeds, hybrid)

Tallis Freight moves 40,000 pallets a week across the UK and we are rebuilding our data platform. You will design
batch and streaming pipelines, own our warehouse models, and mentor two junior engineers. We use Python, SQL,
Kafka and dbt. Salary £62,000 to £74,000 depending on experience, plus a 10% bonus. You will be in the office two
days a week. Closing date for applications: 30 June.""",
        "fields": {"title": S, "company": S, "location": S, "salary_min": N, "salary_max": N, "remote_days": INT},
        "expect": {"salary_min": 62000, "salary_max": 74000, "remote_days": 3},
        "instruction_extra": "remote_days is the number of days per five-day week worked away from the office.",
    },
    {
        "doc": """We're hiring! Junior Front-End Developer at Plum & Pixel, a small studio in Porto building websites
for museums and non-profits. Fully remote within Portugal. Pay: 24,000-30,000 EUR a year. You should know HTML, CSS
and some JavaScript; we'll teach you the rest. Start date: September 1. Send a short note and links to anything
you've built to jobs@plumpixel.example.""",
        "fields": {"title": S, "company": S, "location": S, "salary_min": N, "salary_max": N, "remote_days": INT},
        "expect": {"salary_min": 24000, "salary_max": 30000, "remote_days": 5},
        "instruction_extra": "remote_days is the number of days per five-day week worked away from the office.",
    },
    {
        "doc": """Bright two-bedroom flat in Canal Quarter, third floor with lift. Open-plan kitchen and living room,
one bathroom with a walk-in shower, small balcony facing the water. Rent is 1,450 per month, excluding
utilities; deposit of two months. Cats welcome, no dogs please. Available from 1 August 2025. Minimum lease
twelve months. Viewings on weekday evenings - call Idris on 07700 900321.""",
        "fields": {
            "bedrooms": INT,
            "rent_per_month": N,
            "neighborhood": S,
            "pets_allowed": LIST,
            "available_from": DATE,
        },
        "expect": {"bedrooms": 2, "rent_per_month": 1450, "available_from": "2025-08-01"},
        "instruction_extra": "pets_allowed lists the kinds of pets that are allowed.",
    },
    {
        "doc": """Studio apartment for rent, Millbrook Heights. 38 m2, newly renovated, furnished, washing machine
included. $980 a month plus electricity. Small dogs and cats are allowed with a $200 pet deposit. Free from
15 September 2025. Bus stop outside the building, 10 minutes to the university.""",
        "fields": {
            "bedrooms": INT,
            "rent_per_month": N,
            "neighborhood": S,
            "pets_allowed": LIST,
            "available_from": DATE,
        },
        "expect": {"bedrooms": 0, "rent_per_month": 980, "available_from": "2025-09-15"},
        "instruction_extra": "A studio has 0 bedrooms. pets_allowed lists the kinds of pets that are allowed.",
    },
    {
        "doc": """Minutes - Product sync, 4 February 2025
Present: Yuki Tanaka, Ravi Menon, Claire Dubois, Tom Ashworth
1. Ravi showed the new onboarding flow; completion in the test group rose from 61% to 74%.
2. Decision: ship the new onboarding to all users on 17 February.
3. Claire raised the backlog of support tickets about CSV import. Decision: Tom's team takes CSV import
   fixes in the next sprint; the dashboard redesign moves to March.
4. AOB: Yuki is on leave 10-14 February.
Next meeting: 18 February 2025.""",
        "fields": {"date": DATE, "attendees": LIST, "decisions": LIST, "next_meeting": DATE},
        "expect": {"date": "2025-02-04", "next_meeting": "2025-02-18"},
        "list_len": {"attendees": 4, "decisions": 2},
    },
    {
        "doc": """Notes from the garden committee, 12 May 2025. Attending: Bernadette Osei, Luis Ortega, Hannah Kovacs.
We agreed to buy a second rain barrel (up to 90 pounds) and to move the herb beds to the sunnier corner in June.
Luis will ask the council about a skip for the old fencing. We did not decide on the open day date; Hannah will
send round three options. We meet again on 9 June 2025.""",
        "fields": {"date": DATE, "attendees": LIST, "decisions": LIST, "next_meeting": DATE},
        "expect": {"date": "2025-05-12", "next_meeting": "2025-06-09"},
        "list_len": {"attendees": 3, "decisions": 2},
    },
    {
        "doc": """Review of the Aldergrove 2-slice toaster, 4 out of 5 stars.
I've had this toaster for three months. It browns evenly on both sides, the slots are wide enough for bagels,
and the crumb tray slides out easily. The defrost button actually works. My complaints: the outside gets very
hot, and the timer dial is hard to read because the markings are tiny. Still, for the price I'd buy it again
and I'd recommend it to friends.""",
        "fields": {"product": S, "rating": N, "pros": LIST, "cons": LIST, "would_recommend": B},
        "expect": {"rating": 4, "would_recommend": True},
    },
    {
        "doc": """Two stars for the Nimbus Trail running jacket. It's light and packs into its own pocket, which is
great. But it is not waterproof in proper rain - after 20 minutes my shoulders were soaked - and the zip snagged
twice on the first run. The sizing also runs small. For 120 dollars I expected better. I would not recommend it
unless you only run in drizzle.""",
        "fields": {"product": S, "rating": N, "pros": LIST, "cons": LIST, "would_recommend": B},
        "expect": {"rating": 2, "would_recommend": False},
    },
    {
        "doc": """BOOKING CONFIRMED - Reference QX7P2L
Passenger: Ms Aiko Brennan
Flight NW 418, Northwind Air
Depart: Halvik (HVK) 2025-03-21 07:05  Arrive: Aldmere (ALD) 2025-03-21 09:40
Seat 14C (aisle). Baggage: 1 cabin bag, 1 checked bag 23 kg.
Check-in opens 24 hours before departure.""",
        "fields": {
            "booking_reference": S,
            "flight_number": S,
            "origin": S,
            "destination": S,
            "departure_date": DATE,
            "seat": S,
        },
        "expect": {"booking_reference": "QX7P2L", "seat": "14C", "departure_date": "2025-03-21"},
    },
    {
        "doc": """Hi Jonas, your trip is booked! You fly with Skylark on flight SL 2209 from Vossburg to Kell on
Friday 6 June 2025, leaving at 18:20 and landing at 19:35. Your seat is 3A by the window. Your confirmation
code is 8HDK4R - you'll need it at check-in. Have a good trip!""",
        "fields": {
            "booking_reference": S,
            "flight_number": S,
            "origin": S,
            "destination": S,
            "departure_date": DATE,
            "seat": S,
        },
        "expect": {"booking_reference": "8HDK4R", "seat": "3A", "departure_date": "2025-06-06"},
    },
    {
        "doc": """Appointment reminder: Dear Mr. Felix Adeyemi, this is to remind you of your appointment with
Dr. Sara Whitlock at Arbor Health Westgate on Tuesday 8 April 2025 at 10:20. Please arrive 10 minutes early
and bring a list of any medicines you take. To cancel or rearrange, call 555-0100 at least 24 hours before.""",
        "fields": {
            "patient_name": S,
            "doctor": S,
            "clinic": S,
            "date": DATE,
            "time": {"type": "string", "pattern": r"^\d{2}:\d{2}$"},
        },
        "expect": {"date": "2025-04-08", "time": "10:20"},
    },
    {
        "doc": """Reminder from Kingsgate Dental: Priya Raman has a check-up and clean with Dr. Owen Hale on
2 December 2025 at 3:45 pm. Reply YES to confirm or call the practice to change the time. Missed appointments
without 24 hours' notice may be charged.""",
        "fields": {
            "patient_name": S,
            "doctor": S,
            "clinic": S,
            "date": DATE,
            "time": {"type": "string", "pattern": r"^\d{2}:\d{2}$"},
        },
        "expect": {"date": "2025-12-02", "time": "15:45"},
        "instruction_extra": "Give the time in 24-hour HH:MM format.",
    },
    {
        "doc": """Lemon and thyme roast chicken (serves 4). Prep 20 minutes, cook 1 hour 15 minutes.
You need: 1 whole chicken (about 1.6 kg), 2 lemons, a small bunch of thyme, 6 garlic cloves, 800 g small
potatoes, 3 tbsp olive oil, salt and pepper. Heat the oven to 200C. Halve the lemons and put them inside the
chicken with the thyme and garlic. Toss the potatoes in oil, arrange them around the bird and roast until the
juices run clear.""",
        "fields": {"dish": S, "servings": INT, "prep_minutes": INT, "cook_minutes": INT, "ingredients": LIST},
        "expect": {"servings": 4, "prep_minutes": 20, "cook_minutes": 75},
    },
    {
        "doc": """Quick chickpea curry - makes 2 generous portions. Ready in about 30 minutes: 10 minutes to prepare,
20 to cook. Ingredients: 1 onion, 2 garlic cloves, a thumb of ginger, 1 tbsp curry paste, 1 can chickpeas,
1 can chopped tomatoes, 100 ml coconut milk, a handful of spinach, fresh coriander to serve.""",
        "fields": {"dish": S, "servings": INT, "prep_minutes": INT, "cook_minutes": INT, "ingredients": LIST},
        "expect": {"servings": 2, "prep_minutes": 10, "cook_minutes": 20},
    },
    {
        "doc": """Bug #4412: Export to PDF crashes on reports with more than 1000 rows
Component: reporting-service   Version: 3.8.1   Severity: high
Steps: 1) open any report with >1000 rows 2) click Export 3) choose PDF.
Expected: a PDF downloads. Actual: spinner for ~40 s, then "Internal error"; server log shows OutOfMemoryError
in the PDF renderer. CSV export of the same report works. Reported by: m.castillo""",
        "fields": {
            "bug_id": INT,
            "component": S,
            "version": S,
            "severity": {"enum": ["low", "medium", "high", "critical"]},
            "steps": LIST,
            "expected": S,
            "actual": S,
        },
        "expect": {"bug_id": 4412, "version": "3.8.1", "severity": "high"},
    },
    {
        "doc": """Issue 219 - login page: the "Remember me" box is ignored on Safari 17. I tick it, log in, close the
browser, and I'm logged out next time. Works fine on Firefox. App version 1.12.0. To reproduce: open the login
page in Safari, tick Remember me, log in, quit Safari, reopen the site. I'd call it medium severity - annoying
but there's a workaround (just log in again).""",
        "fields": {
            "bug_id": INT,
            "component": S,
            "version": S,
            "severity": {"enum": ["low", "medium", "high", "critical"]},
            "steps": LIST,
            "expected": S,
            "actual": S,
        },
        "expect": {"bug_id": 219, "version": "1.12.0", "severity": "medium"},
    },
    {
        "doc": """Your order #A-558120 has shipped! 3 items are on their way with Parcelway, tracking number
PW9927310455GB. Estimated delivery: Thursday 16 January 2025, between 9:00 and 13:00. You can change the
delivery day or choose a safe place from the tracking page.""",
        "fields": {"order_id": S, "carrier": S, "tracking_number": S, "item_count": INT, "estimated_delivery": DATE},
        "expect": {
            "order_id": "A-558120",
            "tracking_number": "PW9927310455GB",
            "item_count": 3,
            "estimated_delivery": "2025-01-16",
        },
    },
    {
        "doc": """Good news: the first part of order 40-77812 (one pair of walking boots) left our warehouse today with
Kestrel Express. Tracking: KX-5510-3381. It should arrive by 4 March 2025. The other 2 items in your order will
ship separately.""",
        "fields": {"order_id": S, "carrier": S, "tracking_number": S, "item_count": INT, "estimated_delivery": DATE},
        "expect": {
            "order_id": "40-77812",
            "tracking_number": "KX-5510-3381",
            "item_count": 1,
            "estimated_delivery": "2025-03-04",
        },
        "instruction_extra": "item_count is the number of items in this shipment.",
    },
    {
        "doc": """The Ravenholt Folk Weekend returns to the Corn Exchange on Saturday 23 August 2025! Twelve bands
across two stages, a ceilidh in the evening, and workshops for fiddle and melodeon. Tickets are 28 pounds for
the day (children under 12 free), on sale now at the library and online. Organized by the Ravenholt Arts Trust.""",
        "fields": {"event_name": S, "venue": S, "date": DATE, "ticket_price": N, "organizer": S},
        "expect": {"date": "2025-08-23", "ticket_price": 28},
    },
    {
        "doc": """Join us for Code & Coffee, a relaxed meetup for developers of all levels, on 11 October 2025 from
10:00 at Fieldstone's office (5th floor, 18 Harbor Street). Entry is free - coffee and pastries on us. Talks:
"Testing async Python without tears" and "What I learned shipping a CLI". Hosted by the Harbor Dev Group.""",
        "fields": {"event_name": S, "venue": S, "date": DATE, "ticket_price": N, "organizer": S},
        "expect": {"date": "2025-10-11", "ticket_price": 0},
    },
    {
        "doc": """Elif Şahin - Backend developer
elif.sahin@mailbox.example | Izmir, Turkey
Six years building payment and booking systems. 2021-now: Tourly (Go, PostgreSQL, Kubernetes), led the move
from a monolith to services. 2019-2021: Bilet (Python, Django, Redis). Skills: Go, Python, PostgreSQL, Redis,
Kubernetes, Terraform. Languages: Turkish, English, German (basic).""",
        "fields": {"name": S, "email": S, "years_experience": INT, "skills": LIST},
        "expect": {"email": "elif.sahin@mailbox.example", "years_experience": 6},
    },
    {
        "doc": """Cover letter snippet: My name is Daniel Mbeki and I've worked as a field service technician for
eleven years, the last four maintaining wind turbines offshore. I hold GWO basic safety and high-voltage
certificates and I'm comfortable with hydraulics, PLC troubleshooting and rope access. You can reach me at
d.mbeki@post.example.""",
        "fields": {"name": S, "email": S, "years_experience": INT, "skills": LIST},
        "expect": {"email": "d.mbeki@post.example", "years_experience": 11},
    },
    {
        "doc": """For sale: 2017 Corvane Ryder hatchback, 1.2 petrol, manual, 86,400 km, full service history, two
owners. New tires and brakes last year. Small dent on the rear bumper (see photos). Asking 7,900 EUR or near
offer. Located in Lyon. No test drives without proof of insurance.""",
        "fields": {"make": S, "model": S, "year": INT, "mileage_km": INT, "price": N, "currency": S},
        "expect": {"year": 2017, "mileage_km": 86400, "price": 7900, "currency": "EUR"},
    },
    {
        "doc": """Selling my 2021 Tessel Volta e-scooter - 2,350 km on the clock, battery still holds 90%. Comes with
charger and a phone mount. 420 dollars, cash or bank transfer. Pick up in Millbrook.""",
        "fields": {"make": S, "model": S, "year": INT, "mileage_km": INT, "price": N, "currency": S},
        "expect": {"year": 2021, "mileage_km": 2350, "price": 420, "currency": "USD"},
    },
    {
        "doc": """Ticket #88213 - opened by Gloria Nakamura (account ACC-33019)
"Hi, I was charged twice for my March subscription (two payments of 14.99 on 2 March). I'd like the duplicate
refunded please. This is the second time this has happened, so I'm not happy."
Agent notes: confirmed duplicate charge in billing system. Priority: high (repeat issue).""",
        "fields": {
            "ticket_id": INT,
            "customer": S,
            "account_id": S,
            "category": {"enum": ["billing", "technical", "account", "other"]},
            "priority": {"enum": ["low", "normal", "high", "urgent"]},
            "refund_requested": B,
        },
        "expect": {
            "ticket_id": 88213,
            "account_id": "ACC-33019",
            "category": "billing",
            "priority": "high",
            "refund_requested": True,
        },
    },
    {
        "doc": """Ticket #90107 from Samuel Okoro, account ACC-10482. "The mobile app crashes as soon as I open the
Reports tab, since yesterday's update. Android 14, Pixel 7." No refund asked. Set to normal priority,
assigned to the mobile team.""",
        "fields": {
            "ticket_id": INT,
            "customer": S,
            "account_id": S,
            "category": {"enum": ["billing", "technical", "account", "other"]},
            "priority": {"enum": ["low", "normal", "high", "urgent"]},
            "refund_requested": B,
        },
        "expect": {
            "ticket_id": 90107,
            "account_id": "ACC-10482",
            "category": "technical",
            "priority": "normal",
            "refund_requested": False,
        },
    },
    {
        "doc": """Food hygiene inspection - The Copper Kettle, 9 Wharf Lane. Inspected 19 November 2024 by officer
J. Pritchard. Score: 3 out of 5 (generally satisfactory). Issues found: no date labels on two containers in the
walk-in fridge; hand-wash sink in the prep area blocked by a stack of trays. Re-inspection within 3 months.""",
        "fields": {"restaurant": S, "inspection_date": DATE, "score": INT, "violations": LIST, "inspector": S},
        "expect": {"inspection_date": "2024-11-19", "score": 3},
        "list_len": {"violations": 2},
    },
    {
        "doc": """Kettering & Rowe Q3 results: revenue of $312 million, up 6% on the same quarter last year;
operating profit $28 million. CEO Maya Lindqvist said compact dishwashers drove growth. Full-year revenue guidance
of $1.2 billion was maintained.""",
        "fields": {
            "company": S,
            "quarter": {"enum": ["Q1", "Q2", "Q3", "Q4"]},
            "revenue_million_usd": N,
            "growth_percent": N,
            "ceo": S,
        },
        "expect": {"quarter": "Q3", "revenue_million_usd": 312, "growth_percent": 6},
    },
    {
        "doc": """Caldera Coffee Co. (unaudited) - second quarter trading update. Sales reached $47.5 million, an
increase of 11.2% year on year, as 14 new shops opened. Chief executive Tomás Herrera said app orders now make up
a third of sales.""",
        "fields": {
            "company": S,
            "quarter": {"enum": ["Q1", "Q2", "Q3", "Q4"]},
            "revenue_million_usd": N,
            "growth_percent": N,
            "ceo": S,
        },
        "expect": {"quarter": "Q2", "revenue_million_usd": 47.5, "growth_percent": 11.2},
    },
    {
        "doc": """Lost property log, Cedar Point ferry, 7 July 2025: one child's blue rain jacket (size 6-7), found on
the upper deck of the 16:30 crossing; one set of car keys with a red tag reading "Boat"; one paperback novel.
Items held at the mainland ticket office for 30 days.""",
        "fields": {"date": DATE, "items": LIST, "held_at": S, "hold_days": INT},
        "expect": {"date": "2025-07-07", "hold_days": 30},
        "list_len": {"items": 3},
    },
]

INSTRUCTIONS = [
    "Extract the following fields from the text below and return them as a single JSON object with exactly these "
    "keys: {keys}. Use JSON numbers for numeric values and YYYY-MM-DD for dates.",
    "Read the document and output a JSON object with the keys {keys}. Dates must be YYYY-MM-DD; numbers must be "
    "plain JSON numbers without currency symbols or thousands separators. Output only the JSON.",
    "Fill in this JSON record from the text: keys {keys}. Reply with the JSON object in a ```json block. "
    "Write dates as YYYY-MM-DD and amounts as numbers.",
]
