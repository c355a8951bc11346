"""Hand-written passages (original text, mostly about fictional places, firms and products so that answers
must come from the passage, not from a model's memory). Used by the summarize and rag-qa sets.

Each passage: title, text (150-300 words), key (a term any faithful summary keeps), question (answerable from the
text alone) and answer (a short phrase that appears verbatim in the text), optionally answer_pattern (a case-insensitive
regex any correct answer matches, for answers people phrase in several ways).
"""

PASSAGES = [
    {
        "title": "Harlow Valley water notice",
        "key": "Harlow",
        "question": "Until what date must Harlow Valley residents boil their tap water?",
        "answer": "March 14",
        "answer_pattern": "March 14|14 March",
        "text": (
            "The Harlow Valley Water Authority has issued a precautionary boil-water notice for all homes north of "
            "the Pell River after routine testing on Tuesday found low chlorine levels at two sampling stations. "
            "No harmful bacteria have been detected so far, but the authority says it cannot rule out contamination "
            "until three consecutive days of clean results have been recorded. Residents should bring water to a "
            "rolling boil for at least one minute before drinking it, brushing teeth with it, or using it to make "
            "ice. Water used for showers and laundry does not need to be boiled. The notice stays in force until "
            "March 14, when crews expect to finish replacing a failed dosing pump at the Crane Hill treatment plant. "
            "Free bottled water is available at the community center on Orchard Street from 8 a.m. to 6 p.m., "
            "limited to two cases per household. Restaurants and cafes in the affected area have been told to use "
            "bottled or boiled water for all food preparation, and several have switched to paper cups for the "
            "week. The authority apologized for the inconvenience and said updates will be posted on its website "
            "and read out on local radio every morning at 7:30."
        ),
    },
    {
        "title": "Brightline 4 thermostat setup",
        "key": "Brightline",
        "question": "How long should you hold the dial to reset the Brightline 4 to factory settings?",
        "answer": "ten seconds",
        "answer_pattern": "(ten|10) seconds",
        "text": (
            "The Brightline 4 smart thermostat fits most low-voltage heating and cooling systems with a C-wire. "
            "Before you begin, switch off power to your furnace at the breaker, not just at the old thermostat. "
            "Take a photo of the existing wiring so you can match each wire to the labeled terminals on the new "
            "base plate. Mount the base plate with the two included screws, using the built-in bubble level to "
            "keep it straight, then press the display onto the plate until it clicks. When power is restored, the "
            "thermostat starts a short setup wizard that asks for your Wi-Fi network, your heating type, and "
            "whether you have a heat pump. The first week is a learning period: the Brightline 4 records when you "
            "change the temperature and builds a schedule from those changes. You can edit the schedule at any "
            "time in the companion app. If the display stays blank after installation, check that the C-wire is "
            "seated firmly in its terminal. To reset the thermostat to factory settings, hold the dial down for "
            "ten seconds until the screen flashes blue; this erases your schedule and Wi-Fi details but keeps the "
            "firmware version."
        ),
    },
    {
        "title": "Remote work policy update at Corvane",
        "key": "Corvane",
        "question": "How many days per month may Corvane employees work from another country?",
        "answer": "20 working days",
        "answer_pattern": "\\b(20|twenty) (working )?days",
        "text": (
            "Starting in July, Corvane Logistics will replace its fixed two-days-in-office rule with team-level "
            "agreements. Each team lead will agree with their team which days, if any, everyone should be on site, "
            "and publish that agreement on the internal wiki by June 20. Employees may continue to work fully "
            "remotely if their role was hired as remote. Working from another country is allowed for up to 20 "
            "working days in any calendar year, provided the employee tells the people team at least two weeks in "
            "advance so that tax and insurance requirements can be checked. The company will keep paying the "
            "monthly home-office allowance of 40 euros, and it is adding a one-time grant of 300 euros for an "
            "ergonomic chair or desk, claimable until the end of the year with a receipt. Meeting rooms in the "
            "Rotterdam and Lyon offices will be fitted with better cameras and microphones over the summer so that "
            "hybrid meetings work for people who dial in. Questions about the new policy can be sent to the "
            "people team, who will also hold two open sessions in the first week of July."
        ),
    },
    {
        "title": "The Ostrel glacier study",
        "key": "Ostrel",
        "question": "By how much did the Ostrel glacier's tongue retreat between 2004 and 2023?",
        "answer": "410 meters",
        "answer_pattern": "410 ?(m|meters|metres)",
        "text": (
            "A team from the Northfjord Institute has published nineteen years of measurements from the Ostrel "
            "glacier, a small valley glacier that feeds the town of Halvik's reservoir. Between 2004 and 2023 the "
            "glacier's tongue retreated by 410 meters, and its surface near the terminus thinned by an average of "
            "1.3 meters per year. The researchers used a combination of stakes drilled into the ice, annual "
            "drone surveys, and older aerial photographs to reconstruct the changes. The retreat was not steady: "
            "two very warm summers, in 2014 and 2018, account for almost a third of the total loss. The team also "
            "found that meltwater now reaches the reservoir about three weeks earlier in spring than it did at the "
            "start of the record. For Halvik this means fuller reservoirs in May but lower flows in late August, "
            "when demand from farms is highest. The study recommends that the town extend its storage capacity "
            "and begin planning for a future in which the glacier contributes very little summer water, which the "
            "authors expect could happen within forty years."
        ),
    },
    {
        "title": "Pinecrest library renovation",
        "key": "Pinecrest",
        "question": "Where can Pinecrest library users borrow books while the main building is closed?",
        "answer": "the old fire station on Mill Road",
        "answer_pattern": "fire station",
        "text": (
            "The Pinecrest Public Library will close its main building on Elm Avenue from September 2 for a "
            "fourteen-month renovation. The work will add a children's wing, replace the leaking roof, and make "
            "the entrance and all three floors fully accessible with a new elevator. During the closure, a "
            "temporary branch will open in the old fire station on Mill Road, with about a quarter of the "
            "collection, six public computers, and free Wi-Fi. Books that are not at the temporary branch can be "
            "requested online and picked up there within three days. Due dates for items borrowed before the "
            "closure will be extended automatically, and no late fees will be charged until the main building "
            "reopens. Story time for toddlers will move to the community room at Pinecrest Elementary on "
            "Saturday mornings. The renovation costs 6.2 million dollars, of which 4 million comes from a state "
            "grant and the rest from a local bond approved by voters last November. Library director Ana Ruiz "
            "said the staff had listened to hundreds of comments from residents and that quiet study rooms were "
            "the most requested addition."
        ),
    },
    {
        "title": "Tessel battery recall",
        "key": "Tessel",
        "question": "Which serial numbers are affected by the Tessel power bank recall?",
        "answer": "TS20-4410 through TS20-5980",
        "answer_pattern": "TS20-4410.{1,20}TS20-5980",
        "text": (
            "Tessel Electronics is recalling about 18,000 units of its PowerCube 20 portable charger because the "
            "battery can overheat while charging, posing a fire risk. The recall covers chargers with serial "
            "numbers TS20-4410 through TS20-5980, printed on the underside next to the USB-C port. They were sold "
            "online and in electronics stores between February and August for about 45 dollars. The company has "
            "received eleven reports of units becoming hot enough to deform the casing, including two that caused "
            "minor burns to the owners' hands. No fires have been reported. Owners should stop using the charger "
            "immediately and not throw it in household trash, because damaged lithium batteries can ignite in "
            "garbage trucks. Instead, they can request a prepaid, fire-safe return envelope from Tessel's website "
            "and will receive either a full refund or a replacement from a newer batch, whichever they prefer. "
            "Tessel said the fault was traced to a supplier's change in the cell insulation material and that "
            "all later production has passed additional heat testing."
        ),
    },
    {
        "title": "Marrow Street bakery opens",
        "key": "Marrow",
        "question": "What is the name of the bakery's sourdough starter?",
        "answer": "Gus",
        "text": (
            "After three years of selling bread from a folding table at the Saturday market, Lena Okafor has "
            "opened a bakery of her own on Marrow Street, in the former shoe repair shop next to the post office. "
            "The shop, called Crumb and Kettle, bakes about 200 loaves a day in a second-hand deck oven that Okafor "
            "bought from a hotel that was closing down. Her sourdough is made with a starter she has kept alive "
            "for nine years and named Gus; she jokes that Gus has moved house more often than she has. Besides "
            "bread, the bakery sells cardamom buns, a rye cake with plums, and soup at lunchtime in winter. "
            "Okafor grinds some of her own flour from wheat grown by a farm twelve miles away, and she says the "
            "flavor difference is worth the extra work. The shop opens at 7 a.m. from Tuesday to Saturday and "
            "closes when the bread runs out, which on the first weekend was just after 11. She plans to start "
            "evening baking classes in the spring, limited to eight people per session."
        ),
    },
    {
        "title": "Quarry Lane bus route change",
        "key": "Route 12",
        "question": "How often will Route 12 buses run at peak times after the change?",
        "answer": "every 10 minutes",
        "answer_pattern": "(10|ten) minutes",
        "text": (
            "From April 6, Route 12 will no longer loop through the Quarry Lane industrial estate and will instead "
            "run directly along Station Road to the hospital. The transit agency says the change cuts the end-to-end "
            "journey from 48 to 35 minutes and allows buses to run every 10 minutes at peak times instead of every "
            "15. Riders who used the three stops inside the estate will be served by a new on-demand minibus, "
            "bookable by app or phone, which will connect with Route 12 at the Station Road and Quarry Lane stop. "
            "The minibus costs the same as a regular fare and transfers are free within 60 minutes. Some workers "
            "at the estate raised concerns at a public meeting that the minibus would not be reliable for early "
            "shifts starting at 6 a.m. In response, the agency agreed to run two fixed minibus trips at 5:30 and "
            "5:45 a.m. that do not need booking. The agency will review ridership on both services after six "
            "months and publish the results."
        ),
    },
    {
        "title": "Sorrel Bay seagrass project",
        "key": "seagrass",
        "question": "How many square meters of seagrass were planted in Sorrel Bay in the first season?",
        "answer": "2,400 square meters",
        "answer_pattern": "2,?400",
        "text": (
            "Volunteers in Sorrel Bay have finished the first season of a project to restore seagrass meadows "
            "that disappeared from the bay in the 1980s. Divers and snorkelers planted 2,400 square meters of "
            "eelgrass using seeds collected from a healthy meadow further along the coast. The seeds were packed "
            "into small hessian bags filled with sediment and dropped in rows at low tide, a method that keeps "
            "them from being washed away before they root. Seagrass is valuable because it shelters young fish, "
            "steadies the seabed against storms, and stores carbon in its roots and the mud beneath it. The "
            "project's scientists will survey the plots in late summer to count shoots and compare growth at "
            "different depths. Early checks suggest that plots in water deeper than three meters are doing "
            "better, probably because they are less disturbed by waves. Boat owners have been asked to use the "
            "new visitor moorings rather than dropping anchor inside the marked restoration areas, since anchor "
            "chains can tear up young plants."
        ),
    },
    {
        "title": "Kettering & Rowe quarterly results",
        "key": "Kettering",
        "question": "What was Kettering & Rowe's revenue in the third quarter?",
        "answer": "312 million",
        "answer_pattern": "312",
        "text": (
            "Kettering & Rowe, the kitchen appliance maker, reported third-quarter revenue of 312 million dollars, "
            "up 6 percent from a year earlier, helped by strong sales of its compact dishwashers in apartments "
            "and small homes. Operating profit fell slightly to 28 million dollars because of higher shipping "
            "costs and a one-off charge for closing a warehouse in Ohio. The company said that demand for premium "
            "ovens remained weak as buyers postponed kitchen remodels, but that orders from property developers "
            "had picked up in September. Chief executive Maya Lindqvist told analysts that the firm would "
            "introduce a repair-friendly range next year with parts that owners can replace using ordinary tools, "
            "and that spare parts would be guaranteed for ten years. Kettering & Rowe kept its full-year revenue "
            "forecast of 1.2 billion dollars but lowered its profit outlook. Its shares fell 3 percent in early "
            "trading, then recovered most of the loss by the afternoon."
        ),
    },
    {
        "title": "How the Halden loom works",
        "key": "loom",
        "question": "What part of the Halden loom lifts alternate warp threads?",
        "answer": "the heddle bar",
        "answer_pattern": "heddle",
        "text": (
            "The Halden rigid-heddle loom is a small table loom designed for beginners who want to weave scarves, "
            "placemats and narrow fabric. The long threads that run from front to back are called the warp, and "
            "they are wound onto a back beam before weaving starts. Every other warp thread passes through a slot "
            "in the heddle bar, and the rest pass through small holes between the slots. When the heddle bar is "
            "raised, it lifts alternate warp threads and opens a gap, called a shed, through which the weaver "
            "passes a shuttle carrying the weft thread. Lowering the heddle opens the opposite shed for the next "
            "pass. After each pass the weaver pushes the new row of weft against the fabric with the same heddle, "
            "which also acts as a beater. The finished cloth is rolled onto the front beam as weaving continues. "
            "The loom comes with a 40-centimeter heddle, a warping peg and two stick shuttles, and a second "
            "heddle can be added for finer cloth or simple patterns."
        ),
    },
    {
        "title": "Dunmore allotment rules",
        "key": "allotment",
        "question": "What is the maximum height allowed for sheds on the Dunmore allotments?",
        "answer": "2.2 meters",
        "answer_pattern": "2\\.2 ?(m|meter|metre)",
        "text": (
            "Plot holders at the Dunmore Road allotments are reminded of the rules agreed at the annual meeting. "
            "Each plot must be at least three-quarters cultivated during the growing season; plots left overgrown "
            "for more than eight weeks will receive a warning letter and may be reassigned to the waiting list. "
            "Sheds and greenhouses need approval from the committee and may not be taller than 2.2 meters, so "
            "that they do not shade neighboring plots. Bonfires are allowed only between November and February, "
            "after 4 p.m., and never when the wind is blowing towards the houses on Clay Street. Hosepipes may be "
            "used only to fill water butts, not to water plots directly, because the site shares one meter with "
            "the sports club. Dogs must be kept on a lead and are not allowed on other people's plots. The annual "
            "rent stays at 38 pounds for a full plot and 20 pounds for a half plot, due by the end of January. "
            "The committee thanks everyone who helped rebuild the compost bays in the autumn."
        ),
    },
    {
        "title": "Caldera Coffee loyalty program",
        "key": "Caldera",
        "question": "How many stamps does a Caldera Coffee customer need for a free drink?",
        "answer": "nine stamps",
        "answer_pattern": "(nine|9) stamps",
        "text": (
            "Caldera Coffee is replacing its paper loyalty cards with a digital stamp card in its app. Customers "
            "earn one stamp for each hot or iced drink, and nine stamps earn a free drink of any size, including "
            "seasonal specials. Stamps no longer expire, which was the most common complaint about the paper cards, "
            "but a free drink must be used within 60 days of being earned. Customers who bring a reusable cup "
            "receive an extra stamp once per day. Paper cards can be converted at the counter until the end of "
            "October: staff will scan the card and add the stamps to the customer's account, up to a maximum of "
            "eight, so that nobody loses progress. Customers who do not want to use the app can ask for a "
            "plastic key fob with a barcode, which works in the same way. Caldera says the change is also meant "
            "to cut waste, since the shops printed more than 50,000 paper cards last year."
        ),
    },
    {
        "title": "Night trains between Aldmere and Vossburg",
        "key": "night train",
        "question": "On which nights will the Aldmere to Vossburg night train run in winter?",
        "answer": "Thursday, Friday and Sunday",
        "answer_pattern": "Thursday.{0,12}Friday.{0,12}Sunday",
        "text": (
            "A night train between Aldmere and Vossburg will return in December after an absence of twelve years. "
            "The service, operated jointly by the two national railways, will leave Aldmere at 9:40 p.m. and "
            "arrive in Vossburg at 7:15 the next morning, with stops at Kell and Rostam. In the winter timetable "
            "it runs on Thursday, Friday and Sunday nights in each direction, rising to daily service from June. "
            "Travelers can choose between seats, six-berth couchettes, and private sleeper cabins with a washbasin "
            "for one to three people. A simple breakfast of bread, cheese, fruit and coffee is included in couchette "
            "and sleeper fares. The railways say the cheapest seats will cost less than the average flight on the "
            "same route, and that a couchette booked a month ahead should cost about as much as a budget hotel. "
            "Bicycles can be carried in a dedicated carriage if booked in advance. Tickets go on sale online on "
            "October 1."
        ),
    },
    {
        "title": "Understanding the Fenwick soil survey",
        "key": "soil",
        "question": "What pH range did most fields in the Fenwick survey fall into?",
        "answer": "between 5.8 and 6.4",
        "answer_pattern": "5\\.8\\D{1,12}6\\.4",
        "text": (
            "Last spring the Fenwick Farmers' Cooperative tested soil from 146 fields across the district to help "
            "members decide how much lime and fertilizer to apply. Most fields had a pH between 5.8 and 6.4, which "
            "is slightly acidic and suitable for most crops, although barley and alfalfa prefer less acidic soil. "
            "About one field in eight was below 5.5 and would benefit from liming, mainly on the sandy ground west "
            "of the river. Phosphorus levels were generally adequate, but potassium was low in a third of the "
            "fields used for silage, probably because cutting grass several times a year removes a lot of it. "
            "Organic matter was highest in long-term pasture and lowest in fields that had been in continuous "
            "cereals for more than a decade. The cooperative recommends retesting every four years and will "
            "offer members a discounted rate if they submit samples together in February. A short guide to "
            "taking a representative sample, walking the field in a W pattern, is available from the office."
        ),
    },
    {
        "title": "Arbor Health clinic hours",
        "key": "Arbor Health",
        "question": "What number should Arbor Health patients call for urgent advice when the clinic is closed?",
        "answer": "555-0142",
        "text": (
            "From next month, Arbor Health's Westgate clinic will open on Saturday mornings from 9 a.m. to 12:30 "
            "p.m. for pre-booked appointments. The extra hours are aimed at patients who cannot easily take time "
            "off work, and appointments can be made online or through the reception desk. Weekday opening hours "
            "stay the same, 8 a.m. to 6:30 p.m., with a late clinic until 8 p.m. on Wednesdays. The clinic also "
            "reminds patients that repeat prescriptions should be requested at least three working days before "
            "they run out, because pharmacies need time to prepare them. When the clinic is closed, patients who "
            "need urgent advice should call the out-of-hours line on 555-0142, which is staffed by nurses who can "
            "arrange a doctor's call-back. In an emergency, such as chest pain or difficulty breathing, patients "
            "should call emergency services straight away rather than the clinic. Flu vaccinations for adults "
            "over 65 will start in the first week of October, with walk-in sessions on two Saturdays."
        ),
    },
    {
        "title": "Lindqvist Hall acoustics",
        "key": "Lindqvist Hall",
        "question": "What material are the adjustable panels in Lindqvist Hall made of?",
        "answer": "oak",
        "text": (
            "Lindqvist Hall, the new 900-seat concert hall in Brannholm, was designed around a problem that most "
            "halls ignore: the same room has to suit a string quartet on Monday and an amplified jazz band on "
            "Friday. The solution is a ring of adjustable panels made of oak that line the upper walls. When the "
            "panels are turned with their hard side facing the audience, sound reflects around the room and a "
            "note lingers for about two seconds, which flatters orchestras and choirs. When they are turned to "
            "show felt-covered backs, the echo is cut roughly in half, giving the clarity that speech and amplified "
            "music need. The panels are moved by small motors and can be set in about fifteen minutes between "
            "rehearsals. Acoustician Pieter Vaal said the most difficult part was keeping the motors quiet enough "
            "that they could be adjusted during an interval. The first season opens in October with a program "
            "of music by composers from the region, followed by a weekend of folk and jazz."
        ),
    },
    {
        "title": "Beekeeping course at Greywood",
        "key": "Greywood",
        "question": "How many sessions does the Greywood beginner beekeeping course have?",
        "answer": "six sessions",
        "answer_pattern": "(six|6) sessions",
        "text": (
            "The Greywood Beekeepers' Association will run its beginner course again from April, with six sessions "
            "on alternate Saturday afternoons at the association's teaching apiary behind the village hall. The "
            "first two sessions are indoors and cover the life of the colony, the equipment you need, and how to "
            "choose a site for a hive. After that, students work in small groups at the hives, learning to open a "
            "colony calmly, find the queen, and recognize healthy brood and common diseases. The course also "
            "covers swarm control, which is the main challenge for new beekeepers in May and June. Protective "
            "suits and gloves are provided, but students should bring their own wellington boots. The fee is 90 "
            "pounds and includes a year's membership of the association and a copy of its handbook. People who "
            "are allergic to bee stings should speak to their doctor before signing up. Places are limited to "
            "twelve, and the association suggests that students wait until they have completed the course before "
            "buying bees."
        ),
    },
    {
        "title": "Fieldstone Software security incident",
        "key": "Fieldstone",
        "question": "When did Fieldstone discover the unauthorized access?",
        "answer": "on May 3",
        "answer_pattern": "May 3\\b|\\b3 May",
        "text": (
            "Fieldstone Software has told customers of its invoicing service that an attacker gained access to a "
            "database containing company names, billing addresses and the email addresses of account "
            "administrators. The company discovered the unauthorized access on May 3 after its monitoring flagged "
            "an unusual volume of queries from a service account. Fieldstone says passwords were stored only as "
            "salted hashes and that no payment card data was held in the affected database, since card details "
            "are processed by a separate provider. The attacker used a credential that had been accidentally "
            "included in a public code repository and has since been revoked. As a precaution, Fieldstone has "
            "reset all administrator passwords and is requiring two-factor authentication for every account from "
            "June 1. Customers should be alert to phishing emails that appear to come from Fieldstone and ask "
            "for payment details; the company will never ask for a password by email. An outside security firm "
            "is reviewing the incident and Fieldstone has promised to publish its findings."
        ),
    },
    {
        "title": "Cedar Point ferry winter schedule",
        "key": "ferry",
        "question": "What is the last ferry departure from Cedar Point on weekdays in winter?",
        "answer": "6:15 p.m.",
        "answer_pattern": "6[:.]15",
        "text": (
            "The winter schedule for the Cedar Point ferry takes effect on November 1 and runs until the end of "
            "March. On weekdays the first ferry leaves the mainland at 6:45 a.m. and the last departure from Cedar "
            "Point is at 6:15 p.m., so commuters who work late should plan to stay on the mainland or arrange a "
            "water taxi. On weekends there are four crossings a day in each direction instead of seven. Vehicle "
            "space is limited on the smaller winter vessel, and drivers are strongly advised to book at least a "
            "day ahead; foot passengers and cyclists do not need to book. Crossings may be cancelled at short "
            "notice when winds exceed 35 knots, and the operator will post cancellations by text message to "
            "anyone who signs up with their phone number. Fares are unchanged, although the discounted book of "
            "twenty tickets for island residents now also covers a second named adult in the same household."
        ),
    },
    {
        "title": "The Varn mill museum",
        "key": "Varn",
        "question": "In what year did the Varn mill stop producing flour commercially?",
        "answer": "1961",
        "text": (
            "The Varn mill museum sits beside the weir where a mill has stood since at least the fourteenth "
            "century. The present building dates from 1803 and was powered by an iron waterwheel more than five "
            "meters across, which still turns on open days. The mill produced flour commercially until 1961, when "
            "competition from large roller mills in the cities made it unprofitable, and for twenty years it was "
            "used as a store for animal feed. Volunteers began restoring it in the 1980s, repairing the wheel, "
            "recutting the millstones and rebuilding the wooden gears from drawings made by the last miller's "
            "son. Today visitors can watch wheat being ground on the first Sunday of each month and buy the "
            "flour in the museum shop. An upstairs gallery tells the story of the families who worked at the mill "
            "and of the floods that damaged it in 1894 and 1947. The museum is run entirely by volunteers and "
            "welcomes school groups by arrangement."
        ),
    },
    {
        "title": "Palisade desk chair warranty",
        "key": "Palisade",
        "question": "How long is the warranty on the Palisade chair's gas lift?",
        "answer": "five years",
        "answer_pattern": "(five|5) years",
        "text": (
            "Every Palisade task chair comes with a warranty that covers defects in materials and workmanship "
            "under normal office use by one person for up to eight hours a day. The steel frame and base are "
            "covered for twelve years, the gas lift and tilt mechanism for five years, and the fabric, foam and "
            "armrest pads for two years. The warranty does not cover damage from misuse, such as standing on the "
            "chair, or normal wear such as fading of the fabric in direct sunlight. To make a claim, contact "
            "customer service with your order number and a photo or short video showing the problem. In most "
            "cases the company will send a replacement part with instructions, since almost every part of the "
            "chair can be replaced with a single hex key. If a repair is not possible, it will replace the chair "
            "with the same model or one of equal value. The warranty applies to the original buyer and is not "
            "transferable, but chairs bought through the company's refurbished program carry a fresh three-year "
            "warranty on all parts."
        ),
    },
    {
        "title": "School lunch menu changes at Hollins Primary",
        "key": "Hollins",
        "question": "On which day will Hollins Primary serve a fully vegetarian lunch?",
        "answer": "Wednesday",
        "text": (
            "Parents at Hollins Primary School have received details of the new lunch menu, which the school "
            "kitchen developed with a nutritionist and a group of pupils from the school council. Every Wednesday "
            "will now be a fully vegetarian day, featuring dishes such as lentil and sweet potato curry, bean "
            "chili with rice, and vegetable lasagne. On other days a vegetarian option will still be offered "
            "alongside the main dish. Fresh fruit or yogurt will be served as dessert four days a week, with a "
            "baked pudding on Fridays. Bread is now baked with half wholemeal flour, and fruit juice has been "
            "replaced by water and milk. The kitchen will continue to cater for allergies and medical diets; "
            "parents should update the school office if their child's needs have changed. The price of a school "
            "lunch stays at 2.40 pounds, and families who qualify for free meals do not need to reapply. The "
            "council pupils will taste and rate new dishes each term."
        ),
    },
    {
        "title": "How the Moira tide gauge works",
        "key": "tide gauge",
        "question": "How often does the Moira tide gauge record the water level?",
        "answer": "every six minutes",
        "answer_pattern": "(six|6) minutes",
        "text": (
            "The tide gauge at the end of Moira pier has been measuring sea level since 1921, which makes it one "
            "of the longest records on this coast. The original gauge used a float in a vertical pipe, or stilling "
            "well, connected to the sea by a narrow opening that smoothed out waves so that only the slow rise and "
            "fall of the tide moved the float. A pen attached to the float drew the water level on a paper chart "
            "wrapped around a clockwork drum. Since 2009 the station has used a radar sensor mounted above the "
            "water, which records the level every six minutes and sends the data by mobile network to the "
            "national archive. A pressure sensor on the seabed acts as a backup. Because the land itself is slowly "
            "sinking here, surveyors check the height of the pier against satellite positioning each year, so "
            "that scientists can separate sea-level rise from land movement. The record shows the average sea "
            "level at Moira about 21 centimeters higher than when measurements began."
        ),
    },
    {
        "title": "Greenline electric bike share pricing",
        "key": "Greenline",
        "question": "How much does a Greenline annual membership cost?",
        "answer": "85 dollars",
        "answer_pattern": "(\\$ ?85|85 dollars)\\b",
        "text": (
            "Greenline, the city's bike share, is adding 400 electric bikes to its fleet and changing its prices. "
            "Casual riders will pay a 1 dollar unlock fee plus 15 cents per minute on standard bikes and 25 cents "
            "per minute on electric bikes. An annual membership costs 85 dollars and includes unlimited 45-minute "
            "rides on standard bikes, while members pay 10 cents per minute on electric bikes with no unlock fee. "
            "Riders with a reduced-fare transit card can get the membership for 20 dollars a year. Electric bikes "
            "have a top assisted speed of 25 kilometers per hour and a range of about 60 kilometers, and they must "
            "be returned to a docking station like the standard bikes. Greenline will also add 30 new stations, "
            "mostly in the eastern neighborhoods that currently have few, after residents said the network "
            "favored downtown. The first new stations should be installed by early summer."
        ),
    },
    {
        "title": "Willowmere conservation volunteers",
        "key": "Willowmere",
        "question": "What invasive plant are the Willowmere volunteers removing from the riverbank?",
        "answer": "Himalayan balsam",
        "text": (
            "Every Tuesday morning from May to September, volunteers from the Willowmere conservation group meet "
            "at the footbridge to pull Himalayan balsam from the riverbank. The plant, which was introduced to "
            "gardens in the nineteenth century, grows up to two meters tall and shades out native flowers; when "
            "it dies back in winter it leaves the bank bare and prone to erosion. Its seed pods explode when "
            "touched, scattering seeds several meters, so the group tries to pull plants before they flower. "
            "Balsam has shallow roots and is easy to remove by hand, which makes it a good task for new volunteers. "
            "Over five summers the group has cleared about two kilometers of bank, and native plants such as "
            "meadowsweet and purple loosestrife are returning. Because seeds travel downstream, the group is "
            "working with landowners upstream to tackle the source. Volunteers should wear long sleeves and "
            "gloves; tools, drinks and cake are provided."
        ),
    },
    {
        "title": "Northwind Air baggage rules",
        "key": "Northwind",
        "question": "What is the maximum weight for a Northwind Air cabin bag?",
        "answer": "8 kilograms",
        "answer_pattern": "\\b8 ?(kilograms|kg)",
        "text": (
            "Northwind Air passengers on all fares may bring one small personal item, such as a handbag or laptop "
            "bag, that fits under the seat in front. Standard and Flex fares also include one cabin bag of up to "
            "8 kilograms and 55 by 40 by 23 centimeters, which must fit in the overhead locker. Basic fares do not "
            "include a cabin bag, but one can be added when booking or later online for a lower price than at the "
            "airport. Checked bags may weigh up to 23 kilograms each; heavier bags up to 32 kilograms are accepted "
            "for an extra charge, and anything heavier must be sent as cargo. Sports equipment such as skis and "
            "golf clubs counts as a checked bag if it is within the weight limit. Power banks and spare lithium "
            "batteries must always be carried in the cabin, never in checked luggage. Passengers traveling with "
            "an infant may bring a folding stroller and a car seat free of charge."
        ),
    },
    {
        "title": "Ravenholt community solar",
        "key": "solar",
        "question": "How many households will the Ravenholt community solar array supply?",
        "answer": "about 350 households",
        "answer_pattern": "\\b350\\b",
        "text": (
            "Residents of Ravenholt have voted to build a community-owned solar array on the capped landfill east "
            "of the village, a site that cannot be used for housing or farming. The array will have a capacity of "
            "1.5 megawatts, enough to supply about 350 households over a year, and it will be connected to the "
            "grid through the substation on Kiln Lane. Construction is financed by a share offer open to anyone "
            "in the county, with a minimum investment of 100 pounds, and by a loan from a regional energy fund. "
            "Shareholders are expected to receive interest of around 4 percent a year once the loan is repaid, and "
            "a portion of the surplus will go into a fund for insulating older homes in the village. Because the "
            "panels will sit on concrete blocks rather than posts driven into the ground, they will not disturb "
            "the landfill cap. Sheep from a nearby farm will graze between the rows to keep the grass short."
        ),
    },
    {
        "title": "Ellery Museum of Clocks reopening",
        "key": "Ellery",
        "question": "How old is the oldest clock in the Ellery collection?",
        "answer": "about 400 years",
        "answer_pattern": "400 years",
        "text": (
            "The Ellery Museum of Clocks has reopened after two years of restoration work, with a new layout that "
            "follows the history of timekeeping from sundials and water clocks to atomic time. The oldest object "
            "on display is a German table clock about 400 years old, with a single hour hand and a case engraved "
            "with the signs of the zodiac. Visitors can now see the workshop where conservators repair clocks, "
            "through a glass wall, and on weekdays a conservator explains the work at 2 p.m. A new gallery is "
            "devoted to railway time, telling how the spread of trains forced towns to give up their local time "
            "and set their clocks by a single standard. The museum's famous collection of longcase clocks has been "
            "rearranged so that they can all be heard striking together at noon, which has become a popular "
            "moment for families. Admission is free for children under 16, and the museum is closed on Mondays."
        ),
    },
    {
        "title": "Stonebridge recycling changes",
        "key": "recycling",
        "question": "What color bin should Stonebridge residents use for glass after the change?",
        "answer": "the blue bin",
        "answer_pattern": "blue bin",
        "text": (
            "Stonebridge Council is simplifying household recycling from October. Paper, cardboard, cans, plastic "
            "bottles, food tubs and glass will all go together in the blue bin, which will be collected every two "
            "weeks; the separate box for glass is being withdrawn. The council says a new sorting plant can "
            "separate mixed materials more efficiently than residents and crews could, and that the change should "
            "raise the recycling rate by cutting confusion. Food waste will still be collected weekly in the small "
            "green caddy, and garden waste remains a paid service. Residents who no longer need their glass boxes "
            "can leave them out on their first collection day in October, and crews will take them away to be "
            "recycled. Items that still cannot go in the blue bin include plastic bags and film, nappies, and "
            "takeaway coffee cups, which should go in general waste. Households with large families can request "
            "a second blue bin free of charge."
        ),
    },
]

# Longer versions of some passages (the summarize set should not be uniform in length): appended paragraphs.
_MORE = {
    "Brightline 4 thermostat setup": (
        "If your home has a heat pump, the wizard asks one more question: whether the reversing valve is "
        "energized in cooling or in heating. Most systems use cooling, and the terminal is usually labeled O; "
        "systems labeled B use heating. Choosing the wrong option makes the heat pump cool when you ask for "
        "heat, which is the most common problem reported to support in the first week. The thermostat also "
        "supports an optional remote sensor, sold separately, that you can place in a bedroom or nursery so "
        "that the schedule follows the temperature in that room rather than in the hallway where the thermostat is."
    ),
    "Tessel battery recall": (
        "Retailers have been told to remove remaining stock from their shelves and to accept returns of "
        "affected chargers even without a receipt. Customers who bought the charger as part of a bundle with "
        "headphones or a phone case can return just the charger and keep the rest. The product safety "
        "regulator said it was monitoring the recall and reminded consumers to register new electronics with "
        "their makers, since registered owners are contacted directly when a recall is announced. Tessel "
        "expects to have sent replacement units to everyone who asks for one within six weeks."
    ),
    "Sorrel Bay seagrass project": (
        "Funding for the first season came from a regional fisheries fund and a crowdfunding appeal that "
        "raised more than expected in its first fortnight. The group now hopes to plant a further 5,000 square "
        "meters over the next two years, which would require many more seeds than the donor meadow can safely "
        "provide. To solve this, the project is testing a small nursery tank at the harbor, where seeds are "
        "germinated and grown into young plants before being moved to the bay. Schools in the area have "
        "adopted plots and send pupils to help with surveys from the shore."
    ),
    "Night trains between Aldmere and Vossburg": (
        "The previous service was withdrawn because it lost money and its carriages had reached the end of "
        "their working lives. The new train uses refurbished carriages bought from another operator, fitted "
        "with new mattresses, power sockets at every berth and lockable luggage space. Both governments have "
        "agreed to cover operating losses for the first five years, after which the service will be reviewed. "
        "Environmental groups welcomed the decision, pointing out that the route is one of the busiest short "
        "flights in the region and that a night train allows travelers to arrive in the city center in time "
        "for a morning meeting."
    ),
    "Lindqvist Hall acoustics": (
        "The hall's shape also plays a part. Instead of the traditional shoebox, the seating is arranged in "
        "terraces that surround the stage on all sides, so that no seat is more than 28 meters from the "
        "conductor. The terraces are angled to send early reflections back towards the audience, which helps "
        "listeners hear the musicians clearly even at the back. During construction the builders tested the "
        "room with a starting pistol and a loudspeaker that swept through every frequency, and adjusted the "
        "angle of some balcony fronts by a few degrees after the first measurements."
    ),
    "Palisade desk chair warranty": (
        "Customers sometimes ask whether the warranty still applies if they have replaced a part themselves. "
        "It does, provided the replacement part came from Palisade or an authorized dealer; fitting parts from "
        "other makers voids the warranty for the part concerned but not for the rest of the chair. The company "
        "also publishes free video guides for the most common repairs, such as replacing the gas lift or the "
        "casters, and it sells hard-floor casters as an optional accessory for people who work on wood or "
        "tiles. Used chairs can be sent back for recycling at the end of their life."
    ),
    "How the Moira tide gauge works": (
        "Tide gauges like this one matter well beyond the harbor. Engineers use the long record to set the "
        "height of new sea walls and drainage outlets, and forecasters compare the live readings with their "
        "predictions to warn of storm surges, when strong winds and low air pressure push the sea above the "
        "normal tide. On one night in 2013 the gauge recorded water 1.4 meters above the predicted level, the "
        "highest in its history. The original paper charts, which fill more than 300 boxes, are being "
        "scanned so that researchers can study the early decades in more detail."
    ),
    "Ravenholt community solar": (
        "The plan was not without opposition. Some residents worried about glare and the view from the "
        "footpath along the ridge, and the group agreed to plant a hedge of native shrubs along the northern "
        "edge of the site. Others asked whether the landfill gas vents would be affected; an engineer's report "
        "found that the vents could stay where they are, with panels arranged around them. Construction is "
        "expected to take four months, and the group plans to hold an open day when the array is switched on, "
        "with guided walks and a display showing how much power it produces in real time."
    ),
    "Stonebridge recycling changes": (
        "The council admits that the switch to two-weekly collection of the blue bin has caused some concern, "
        "especially among households in flats with little space for a large bin. Residents of flats with "
        "shared bins will keep weekly collections, and the council will review the schedule after a year. "
        "Leaflets explaining the changes, with pictures of what goes in each bin, will be delivered to every "
        "home in September and are available in six languages. A free app sends a reminder the evening "
        "before each collection and tells residents which bins to put out."
    ),
}
for _p in PASSAGES:
    if _p["title"] in _MORE:
        _p["text"] = _p["text"] + "\n\n" + _MORE.pop(_p["title"])
assert not _MORE, f"unknown titles: {list(_MORE)}"
