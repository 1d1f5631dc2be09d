"""Regenerates workspace/customers_raw.csv and tests/expected.csv from ground truth
(deterministic). Not part of the workspace."""

import csv
import random
from datetime import date, timedelta

rng = random.Random(99)
FIRST = [
    "Anna",
    "Ben",
    "Chloé",
    "David",
    "Eva",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Kofi",
    "Lena",
    "Marta",
    "Nils",
    "Olga",
    "Pedro",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Umar",
    "Vera",
    "Wim",
    "Xenia",
    "Yusuf",
    "Zoe",
]
LAST = [
    "Andersen",
    "Brown",
    "Costa",
    "Dubois",
    "Eriksen",
    "Fischer",
    "García",
    "Hansen",
    "Ivanova",
    "Jansen",
    "Khan",
    "Larsen",
    "Müller",
    "Nowak",
    "O'Neill",
    "Petrov",
    "Rossi",
    "Schmidt",
    "Tanaka",
    "Urban",
    "Vogel",
    "Weber",
    "Young",
    "Zimmer",
]
DOMAINS = ["example.com", "mail.example.org", "post.example.net", "corp.example.co.uk"]
COUNTRIES = ["DE", "FR", "NL", "GB", "ES", "IT", "SE", "NO", "PL", "DK"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def messy_spaces(s):
    return (
        rng.choice(["", " ", "  ", "\t"]) * (rng.random() < 0.3)
        + s
        + rng.choice(["", " ", "   "]) * (rng.random() < 0.3)
    )


def render_date(d):
    k = rng.randrange(7)
    if k <= 2:
        return d.isoformat()
    if k == 3:
        return f"{d.year}/{d.month:02d}/{d.day:02d}"
    if k == 4:
        return f"{d.day:02d}/{d.month:02d}/{d.year}"
    if k == 5:
        return f"{d.day:02d}.{d.month:02d}.{d.year}"
    month = MONTHS[d.month - 1]
    return f"{month if rng.random() < 0.5 else month[:3]} {d.day}, {d.year}"


def render_name(name):
    if rng.random() < 0.2:
        name = name.replace(" ", rng.choice(["  ", "   ", " \t "]))
    return messy_spaces(name)


def render_email(email):
    if rng.random() < 0.25:
        email = email.upper() if rng.random() < 0.5 else email.capitalize()
    return messy_spaces(email)


truth = []  # (id, name, email, date, country)
used_emails = set()
ids = rng.sample(range(1000, 9999), 400)
for i in range(260):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    name = f"{first} {last}"
    if rng.random() < 0.05:
        name = f"{last}, {first}"
    base = (
        (first[0] + "." + last)
        .lower()
        .replace("'", "")
        .replace("é", "e")
        .replace("ü", "u")
        .replace("í", "i")
    )
    email = f"{base}@{rng.choice(DOMAINS)}"
    while email in used_emails:
        email = f"{base}{rng.randint(2, 99)}@{email.split('@')[1]}"
    used_emails.add(email)
    d = date(2021, 1, 1) + timedelta(days=rng.randrange(3 * 365))
    truth.append((ids[i], name, email, d, rng.choice(COUNTRIES)))

raw = []  # (sort key, row)
for rec in truth:
    rid, name, email, d, country = rec
    row = [
        messy_spaces(str(rid) if rng.random() < 0.95 else f"0{rid}"),
        render_name(name),
        render_email(email),
        messy_spaces(render_date(d)),
        messy_spaces(country if rng.random() < 0.8 else country.lower()),
    ]
    raw.append(row)

expected = {rec[2]: rec for rec in truth}
next_id = 260
# duplicates of existing customers (same email, different case/whitespace/date format)
for rec in rng.sample(truth, 24):
    rid, name, email, d, country = rec
    new_id = ids[next_id]
    next_id += 1
    shift = rng.choice([-40, -3, 0, 0, 5, 90])
    d2 = d + timedelta(days=shift)
    raw.append(
        [
            messy_spaces(str(new_id)),
            render_name(name),
            render_email(email),
            messy_spaces(render_date(d2)),
            messy_spaces(country),
        ]
    )
    cand = (new_id, name, email, d2, country)
    cur = expected[email]
    if (cand[3], cand[0]) < (cur[3], cur[0]):
        expected[email] = cand
# exact duplicate lines
for row in rng.sample(raw[:260], 6):
    raw.append(list(row))

# invalid rows: each breaks exactly one rule
bad_values = {
    "id": ["", "abc", "12.5", "-44", "0", "#N/A"],
    "name": ["", "   "],
    "email": [
        "",
        "no-at-sign.example.com",
        "two@@example.com",
        "x@localhost",
        "y@example.",
        "@example.com",
        "a b@example.com",
    ],
    "date": [
        "",
        "2022-02-30",
        "31/04/2022",
        "2022-13-01",
        "yesterday",
        "03-15-2022",
        "Smarch 3, 2022",
        "15.3.22",
    ],
    "country": ["", "Germany", "D", "DEU", "1A"],
}
for field, values in bad_values.items():
    for value in values:
        new_id = ids[next_id]
        next_id += 1
        first, last = rng.choice(FIRST), rng.choice(LAST)
        row = [
            str(new_id),
            f"{first} {last}",
            f"{first.lower()}.{new_id}@example.com",
            render_date(date(2022, 6, 1) + timedelta(days=rng.randrange(200))),
            rng.choice(COUNTRIES),
        ]
        row[["id", "name", "email", "date", "country"].index(field)] = messy_spaces(value)
        raw.append(row)

header = ["id", "name", "email", "signup_date", "country"]
first_rows, rest = raw[:20], raw[20:]
rng.shuffle(rest)
with open("workspace/customers_raw.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    w.writerows(first_rows + rest)
with open("tests/expected.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    for rec in sorted(expected.values()):
        w.writerow([rec[0], rec[1], rec[2], rec[3].isoformat(), rec[4]])
print(len(raw), "raw rows,", len(expected), "expected")
