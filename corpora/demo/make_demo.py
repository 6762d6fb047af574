#!/usr/bin/env python3
"""Generate the bundled German–English demo corpus (invented adverse-drug-reaction reports).

Why: the project needs a small parallel corpus it may ship (README demo, tests, canary
audit) with no licence strings attached. Every sentence here is built from templates
written for this project; every patient, physician, pharmacist, drug, hospital, date,
dose, phone number, case number and insurance number is invented. The names and
numbers are deliberately unique per report, so they make good secrets for an audit.

Each report (one "document") is 4–8 sentences about one invented patient. Reports are
assigned whole to test, valid and train (in that order), so no report crosses splits;
a sentence pair an earlier split already holds is left out of the later one (so a
held-out pair is never a training pair), and the splits hold exactly 100 / 50 / 400.

Deterministic: the same script gives byte-identical files (seeded `random.Random`,
no dependence on hash order, locale or time). Usage:

    python3 corpora/demo/make_demo.py              # rewrites the files beside this script
    python3 corpora/demo/make_demo.py --out DIR    # writes DIR/{train,valid,test}.{de,en}
"""
import argparse
import os
import random

SEED = 20210611
SIZES = (("test", 100), ("valid", 50), ("train", 400))

# --- invented vocabulary -------------------------------------------------------------

FEMALE_FIRST = ["Malvina", "Henrike", "Liesa", "Ortrun", "Wiebke", "Jolanda", "Svenja",
                "Edeltraud", "Mareike", "Ronja", "Gesine", "Tabea", "Ilka", "Rosalie",
                "Frauke", "Almut", "Leonie", "Dörte", "Imke", "Carlotta"]
MALE_FIRST = ["Tjark", "Eckhard", "Bastian", "Lorenz", "Friedhelm", "Jannik", "Ottmar",
              "Volker", "Hauke", "Severin", "Detlev", "Ruben", "Arnulf", "Mattes",
              "Gernot", "Till", "Bertram", "Jörn", "Kasimir", "Reinolf"]
SURNAMES = ["Quastenberg", "Pflimmer", "Harrbusch", "Tellkamper", "Grummeisen",
            "Schnorrlach", "Vossmerling", "Lindenhaupt", "Wendeling", "Ostrowen",
            "Falkenried", "Morbacher", "Zellinger", "Kuhnrath", "Ebbinghoff", "Sprengler",
            "Rosswald", "Oberkirchner", "Dammüller", "Brechtold", "Hollweger", "Iskander",
            "Jaschkowitz", "Knöbelring", "Lützenkamp", "Mertensohn", "Nadolny-Graf",
            "Pörtner", "Quirrenbach", "Schwelmbach", "Thielking", "Uhlendorff",
            "Wachtelborn", "Zimmerlein", "Achterbusch", "Brösike"]

# Invented drug names (not marketed products).
DRUGS = ["Velmorax", "Quintarol", "Florexidan", "Ambrivastat", "Corvelint", "Lunabrin",
         "Tezomarin", "Primoxel", "Savrilon", "Orbetazin", "Kalvedon", "Nuvatrex",
         "Zelopramin", "Dramivex", "Hestolin", "Ritaprazin", "Movelicor", "Pandurex",
         "Glimastrol", "Fenolvazin", "Trabuxen", "Desmolent", "Xylaparin", "Obratim"]

# (German, English) — conditions after "zur Behandlung von" / "for the treatment of".
INDICATIONS = [("Bluthochdruck", "high blood pressure"), ("Migräne", "migraine"),
               ("Asthma", "asthma"), ("Diabetes", "diabetes"), ("Epilepsie", "epilepsy"),
               ("Schlafstörungen", "sleep disorders"), ("Gicht", "gout"),
               ("Sodbrennen", "heartburn"), ("Depressionen", "depression"),
               ("Vorhofflimmern", "atrial fibrillation"), ("Osteoporose", "osteoporosis"),
               ("Heuschnupfen", "hay fever"), ("Rückenschmerzen", "back pain"),
               ("Schuppenflechte", "psoriasis")]

# Reactions: German noun, grammatical gender/number (m, f, n, pl), English noun,
# whether English needs "a" before the adjective.
REACTIONS = [("Kopfschmerzen", "pl", "headaches", False),
             ("Übelkeit", "f", "nausea", False),
             ("Schwindel", "m", "dizziness", False),
             ("Hautausschlag", "m", "skin rash", True),
             ("Durchfall", "m", "diarrhoea", False),
             ("Juckreiz", "m", "itching", False),
             ("Müdigkeit", "f", "fatigue", False),
             ("Herzrasen", "n", "palpitations", False),
             ("Erbrechen", "n", "vomiting", False),
             ("Muskelschmerzen", "pl", "muscle pain", False),
             ("Atemnot", "f", "shortness of breath", False),
             ("Schlaflosigkeit", "f", "insomnia", False),
             ("Sehstörungen", "pl", "visual disturbances", False),
             ("Gelenkschmerzen", "pl", "joint pain", False),
             ("Husten", "m", "cough", True),
             ("Ohrensausen", "n", "tinnitus", False),
             ("Bauchschmerzen", "pl", "abdominal pain", False),
             ("Mundtrockenheit", "f", "dry mouth", False)]

# Masculine nouns that German uses with "ein" here (the rest take no article).
COUNTABLE_DE = {"Hautausschlag"}

# Adjective stem (German strong declension is added below), English adjective.
SEVERITY = [("leicht", "mild"), ("mäßig", "moderate"), ("stark", "severe")]

# Strong adjective endings (no article before the adjective).
ENDINGS = {"nom": {"m": "er", "f": "e", "n": "es", "pl": "e"},
           "acc": {"m": "en", "f": "e", "n": "es", "pl": "e"},
           "dat": {"m": "em", "f": "er", "n": "em", "pl": "en"}}

HOSPITALS = [("Klinikum Bergstetten", "Bergstetten Hospital"),
             ("Kreiskrankenhaus Elmshagen", "Elmshagen District Hospital"),
             ("Städtische Klinikum Rabenau", "Rabenau Municipal Hospital"),
             ("Krankenhaus am Lindenbühl", "Lindenbühl Hospital"),
             ("Klinikum Wersefeld", "Wersefeld Hospital"),
             ("Kreiskrankenhaus Ohlenbrück", "Ohlenbrück District Hospital")]

ALLERGENS = [("Penicillin", "penicillin"), ("Nüsse", "nuts"), ("Latex", "latex"),
             ("Hausstaub", "house dust"), ("Jod", "iodine"), ("Bienengift", "bee venom")]

RELATIVES = [("ihrer Tochter", "her daughter", "seiner Tochter", "his daughter"),
             ("ihres Sohnes", "her son", "seines Sohnes", "his son"),
             ("ihres Ehemannes", "her husband", "seiner Ehefrau", "his wife"),
             ("ihrer Nachbarin", "her neighbour", "seiner Nachbarin", "his neighbour")]

MONTHS_DE = ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August",
             "September", "Oktober", "November", "Dezember"]
MONTHS_EN = ["January", "February", "March", "April", "May", "June", "July", "August",
             "September", "October", "November", "December"]
DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

DOSES_MG = ["0.5", "1.25", "2.5", "5", "10", "20", "25", "40", "50", "75", "100", "150",
            "200", "250", "400", "500"]


# --- helpers -------------------------------------------------------------------------

def num(value, lang, decimals=None):
    """A number as written in German (decimal comma) or English (decimal point)."""
    text = value if isinstance(value, str) else (
        f"{value:.{decimals}f}" if decimals is not None else str(value))
    return text.replace(".", ",") if lang == "de" else text


class Date:
    """A calendar date (2021–2024, no leap days needed) that prints in both languages."""

    def __init__(self, ordinal):
        self.ordinal = ordinal  # days since 1 January 2021

    def parts(self):
        year, rest = 2021 + self.ordinal // 365, self.ordinal % 365
        month = 0
        while rest >= DAYS_IN_MONTH[month]:
            rest -= DAYS_IN_MONTH[month]
            month += 1
        return rest + 1, month, year

    def de(self):
        d, m, y = self.parts()
        return f"{d}. {MONTHS_DE[m]} {y}"

    def en(self):
        d, m, y = self.parts()
        return f"{d} {MONTHS_EN[m]} {y}"

    def plus(self, days):
        return Date(self.ordinal + days)


class Person:
    def __init__(self, first, last, female):
        self.first, self.last, self.female = first, last, female

    @property
    def name(self):
        return f"{self.first} {self.last}"


class Report:
    """All the invented facts of one report, and its sentence templates."""

    def __init__(self, rng, index, patient, reporter, doctor):
        self.rng = rng
        self.p = patient
        self.reporter = reporter
        self.doctor = doctor
        self.age = rng.randint(19, 91)
        drugs = rng.sample(DRUGS, 3)
        self.drug, self.drug2, self.drug3 = drugs
        self.dose = rng.choice(DOSES_MG)
        self.indication = rng.choice(INDICATIONS)
        self.reactions = rng.sample(REACTIONS, 2)
        self.severity = [rng.choice(SEVERITY) for _ in range(2)]
        self.start = Date(rng.randint(0, 3 * 365 - 60))
        self.onset = self.start.plus(rng.randint(2, 21))
        self.action_date = self.onset.plus(rng.randint(0, 3))
        self.recovery = self.action_date.plus(rng.randint(3, 20))
        self.report_date = self.recovery.plus(rng.randint(1, 30))
        self.case = f"DE-{self.report_date.parts()[2]}-{rng.randint(1000, 99999):05d}"
        self.insurance = f"{chr(65 + rng.randint(0, 25))}{rng.randint(10**8, 10**9 - 1)}"
        self.phone = (f"0{rng.choice(['151', '160', '172', '176', '30', '40', '89', '221'])} "
                      f"{rng.randint(100, 9999)} {rng.randint(1000, 9999)}")
        self.hospital = rng.choice(HOSPITALS)
        self.index = index

    # pronouns and nouns for the patient
    def sie(self):
        return "sie" if self.p.female else "er"

    def ihr(self):  # dative personal pronoun
        return "ihr" if self.p.female else "ihm"

    def poss(self):  # possessive for a masculine noun in the nominative (Zustand)
        return "ihr" if self.p.female else "sein"

    def she(self):
        return "she" if self.p.female else "he"

    def her(self):
        return "her" if self.p.female else "his"

    def title_de(self, case="nom"):
        if self.p.female:
            return "Frau"
        return "Herrn" if case == "dat" else "Herr"

    def title_en(self):
        return "Ms" if self.p.female else "Mr"

    def patient_de(self, article_case="nom"):
        if self.p.female:
            return {"nom": "die Patientin", "dat": "der Patientin"}[article_case]
        return {"nom": "der Patient", "dat": "dem Patienten"}[article_case]

    def dose_de(self, dose=None):
        return f"{num(dose or self.dose, 'de')} mg"

    def dose_en(self, dose=None):
        return f"{num(dose or self.dose, 'en')} mg"

    def lower_dose(self):
        i = DOSES_MG.index(self.dose)
        return "0.25" if i == 0 else DOSES_MG[max(0, i - self.rng.randint(1, 3))]

    def reaction(self, k, case):
        """(German adjective+noun in `case`, English adjective+noun) for reaction k."""
        noun_de, gender, noun_en, countable = self.reactions[k]
        adj_de, adj_en = self.severity[k]
        if noun_de in COUNTABLE_DE:  # "einen starken Hautausschlag": mixed declension
            article, ending = {"nom": ("ein", "er"), "acc": ("einen", "en"),
                               "dat": ("einem", "en")}[case]
            de = f"{article} {adj_de}{ending} {noun_de}"
        else:
            de = f"{adj_de}{ENDINGS[case][gender]} {noun_de}"
        en = f"{'a ' if countable else ''}{adj_en} {noun_en}"
        return de, en, gender

    # --- sentences: each returns (German, English) ---------------------------------

    def intro(self):
        r, p = self.rng, self.p
        ind_de, ind_en = self.indication
        choice = r.randrange(4)
        if choice == 0:
            return (f"{self.title_de()} {p.name}, {self.age} Jahre alt, nimmt seit dem "
                    f"{self.start.de()} täglich {self.dose_de()} {self.drug} zur Behandlung "
                    f"von {ind_de}.",
                    f"{self.title_en()} {p.name}, aged {self.age}, has been taking "
                    f"{self.dose_en()} of {self.drug} daily for the treatment of {ind_en} "
                    f"since {self.start.en()}.")
        if choice == 1:
            noun_de = "Die" if p.female else "Der"
            patient = "Patientin" if p.female else "Patient"
            return (f"{noun_de} {self.age}-jährige {patient} {p.name} erhielt ab dem "
                    f"{self.start.de()} zweimal täglich {self.dose_de()} {self.drug}.",
                    f"The {self.age}-year-old patient {p.name} received {self.dose_en()} "
                    f"of {self.drug} twice daily from {self.start.en()}.")
        if choice == 2:
            return (f"Bei {self.title_de('dat')} {p.name} ({self.age}) wurde am "
                    f"{self.start.de()} eine Therapie mit {self.drug} ({self.dose_de()} pro "
                    f"Tag) begonnen.",
                    f"{self.title_en()} {p.name} ({self.age}) started treatment with "
                    f"{self.drug} ({self.dose_en()} per day) on {self.start.en()}.")
        return (f"Am {self.start.de()} verordnete Dr. {self.doctor.name} "
                f"{self.title_de('dat')} {p.name} {self.dose_de()} {self.drug} am Morgen "
                f"gegen {ind_de}.",
                f"On {self.start.en()}, Dr. {self.doctor.name} prescribed "
                f"{self.title_en()} {p.name} {self.dose_en()} of {self.drug} in the morning "
                f"for {ind_en}.")

    def background(self):
        r = self.rng
        choice = r.randrange(5)
        if choice == 0:
            weight, height = r.randint(48, 128), r.randint(152, 198)
            return (f"{self.sie().capitalize()} wiegt {weight} kg und ist {height} cm groß.",
                    f"{self.she().capitalize()} weighs {weight} kg and is {height} cm tall.")
        if choice == 1:
            de, en = r.choice(ALLERGENS)
            return (f"Eine Allergie gegen {de} ist bekannt.",
                    f"{self.she().capitalize()} has a known allergy to {en}.")
        if choice == 2:
            d2 = r.choice(DOSES_MG)
            d3 = r.choice(DOSES_MG)
            return (f"Weitere Medikamente: {self.drug2} {self.dose_de(d2)} und "
                    f"{self.drug3} {self.dose_de(d3)}.",
                    f"Other medication: {self.drug2} {self.dose_en(d2)} and "
                    f"{self.drug3} {self.dose_en(d3)}.")
        if choice == 3:
            months = r.randint(2, 30)
            return (f"{self.drug3} hatte {self.sie()} zuvor {months} Monate lang gut "
                    f"vertragen.",
                    f"{self.she().capitalize()} had previously tolerated {self.drug3} well "
                    f"for {months} months.")
        return (f"{'Ihre' if self.p.female else 'Seine'} Versichertennummer lautet "
                f"{self.insurance}.",
                f"{self.her().capitalize()} insurance number is {self.insurance}.")

    def onset_sentence(self):
        r = self.rng
        days = self.onset.ordinal - self.start.ordinal
        choice = r.randrange(4)
        if choice == 0:
            de, en, gender = self.reaction(0, "nom")
            verb = "traten" if gender == "pl" else "trat"
            return (f"{days} Tage später {verb} bei {self.ihr()} {de} auf.",
                    f"{days} days later, {self.she()} developed {en}.")
        if choice == 1:
            de, en, _ = self.reaction(0, "acc")
            return (f"Am {self.onset.de()} klagte {self.sie()} über {de}.",
                    f"On {self.onset.en()}, {self.she()} complained of {en}.")
        if choice == 2:
            de, en, _ = self.reaction(0, "dat")
            return (f"Seit dem {self.onset.de()} leidet {self.patient_de()} unter {de}.",
                    f"Since {self.onset.en()}, the patient has been suffering from {en}.")
        de, en, _ = self.reaction(0, "acc")
        return (f"Kurz nach der ersten Einnahme bemerkte {self.sie()} {de}.",
                f"Shortly after the first dose, {self.she()} noticed {en}.")

    def second_symptom(self):
        r = self.rng
        if r.random() < 0.5:
            de, en, _ = self.reaction(1, "acc")
            return (f"Zusätzlich bemerkte {self.sie()} {de}.",
                    f"{self.she().capitalize()} also noticed {en}.")
        de, en, gender = self.reaction(1, "nom")
        verb = "kamen" if gender == "pl" else "kam"
        return (f"Später {verb} noch {de} hinzu.",
                f"Later, {self.she()} also developed {en}.")

    def measurement(self):
        r = self.rng
        choice = r.randrange(6)
        if choice == 0:
            sys_, dia, pulse = r.randint(95, 185), r.randint(55, 110), r.randint(48, 130)
            return (f"Der Blutdruck lag bei {sys_}/{dia} mmHg, der Puls bei {pulse} "
                    f"Schlägen pro Minute.",
                    f"Blood pressure was {sys_}/{dia} mmHg and the pulse was {pulse} beats "
                    f"per minute.")
        if choice == 1:
            t = r.randint(375, 402) / 10
            return (f"Die Körpertemperatur betrug {num(t, 'de', 1)} °C.",
                    f"Body temperature was {num(t, 'en', 1)} °C.")
        if choice == 2:
            alt = r.randint(60, 420)
            return (f"Im Labor zeigte sich ein erhöhter ALT-Wert von {alt} U/l.",
                    f"Laboratory tests showed an elevated ALT level of {alt} U/L.")
        if choice == 3:
            glucose = r.randint(45, 320)
            return (f"Der Blutzucker lag bei {glucose} mg/dl.",
                    f"Blood glucose was {glucose} mg/dL.")
        if choice == 4:
            crea = r.randint(12, 38) / 10
            return (f"Das Kreatinin war auf {num(crea, 'de', 1)} mg/dl gestiegen.",
                    f"Creatinine had risen to {num(crea, 'en', 1)} mg/dL.")
        k = r.randint(29, 64) / 10
        return (f"Der Kaliumwert betrug {num(k, 'de', 1)} mmol/l.",
                f"The potassium level was {num(k, 'en', 1)} mmol/L.")

    def action(self):
        r = self.rng
        choice = r.randrange(6)
        if choice == 0:
            return (f"{self.drug} wurde am {self.action_date.de()} abgesetzt.",
                    f"{self.drug} was discontinued on {self.action_date.en()}.")
        if choice == 1:
            low = self.lower_dose()
            return (f"Die Dosis wurde auf {self.dose_de(low)} täglich reduziert.",
                    f"The dose was reduced to {self.dose_en(low)} daily.")
        if choice == 2:
            d2 = r.choice(DOSES_MG)
            return (f"Dr. {self.doctor.name} verordnete zusätzlich {self.drug2} "
                    f"({self.dose_de(d2)} am Abend).",
                    f"Dr. {self.doctor.name} additionally prescribed {self.drug2} "
                    f"({self.dose_en(d2)} in the evening).")
        if choice == 3:
            h_de, h_en = self.hospital
            return (f"Am {self.action_date.de()} wurde {self.sie()} ins {h_de} eingewiesen.",
                    f"On {self.action_date.en()}, {self.she()} was admitted to {h_en}.")
        if choice == 4:
            return (f"Die Behandlung mit {self.drug} wurde unverändert fortgesetzt.",
                    f"Treatment with {self.drug} was continued unchanged.")
        days = r.randint(2, 10)
        return (f"{self.drug} wurde für {days} Tage pausiert und danach in halber Dosis "
                f"wieder aufgenommen.",
                f"{self.drug} was paused for {days} days and then resumed at half the dose.")

    def outcome(self):
        r = self.rng
        days = self.recovery.ordinal - self.action_date.ordinal
        choice = r.randrange(6)
        if choice == 0:
            return (f"Nach {days} Tagen waren die Beschwerden vollständig abgeklungen.",
                    f"After {days} days, the symptoms had resolved completely.")
        if choice == 1:
            return (f"Am {self.recovery.de()} ging es {self.ihr()} wieder gut.",
                    f"On {self.recovery.en()}, {self.she()} was well again.")
        if choice == 2:
            return ("Zum Zeitpunkt der Meldung bestanden die Beschwerden weiterhin.",
                    "At the time of reporting, the symptoms were still present.")
        if choice == 3:
            return (f"{self.sie().capitalize()} erholte sich ohne bleibende Schäden.",
                    f"{self.she().capitalize()} recovered without lasting effects.")
        if choice == 4:
            return (f"Innerhalb einer Woche besserte sich {self.poss()} Zustand deutlich.",
                    f"Within a week, {self.her()} condition improved markedly.")
        return (f"{self.sie().capitalize()} wurde am {self.recovery.de()} in gutem "
                f"Allgemeinzustand entlassen.",
                f"{self.she().capitalize()} was discharged in good general condition on "
                f"{self.recovery.en()}.")

    def reporting(self, used):
        """One closing sentence of a kind not yet in `used` (a set of kinds)."""
        r = self.rng
        kinds = [k for k in range(5) if k not in used]
        choice = r.choice(kinds)
        used.add(choice)
        rep = self.reporter
        if choice == 0:
            de, en = r.choice([("wahrscheinlich", "probable"), ("möglich", "possible"),
                               ("unwahrscheinlich", "unlikely")])
            return (f"Ein Zusammenhang mit {self.drug} wird als {de} eingestuft.",
                    f"A causal relationship with {self.drug} is considered {en}.")
        if choice == 1:
            return (f"Die Meldung trägt die Fallnummer {self.case}.",
                    f"The report has the case number {self.case}.")
        if choice == 2:
            if rep.female:
                who_de, who_en = r.choice([(f"von der Apothekerin {rep.name}",
                                            f"the pharmacist {rep.name}"),
                                           (f"von der Hausärztin Dr. {rep.name}",
                                            f"the general practitioner Dr. {rep.name}")])
            else:
                who_de, who_en = r.choice([(f"vom Apotheker {rep.name}",
                                            f"the pharmacist {rep.name}"),
                                           (f"vom Hausarzt Dr. {rep.name}",
                                            f"the general practitioner Dr. {rep.name}")])
            return (f"Der Fall wurde am {self.report_date.de()} {who_de} gemeldet.",
                    f"The case was reported by {who_en} on {self.report_date.en()}.")
        if choice == 3:
            return (f"Rückfragen bitte an {rep.name} unter {self.phone}.",
                    f"Please direct queries to {rep.name} at {self.phone}.")
        rel = r.choice(RELATIVES)
        who_de, who_en = (rel[0], rel[1]) if self.p.female else (rel[2], rel[3])
        return (f"Laut Angaben {who_de} hatte {self.sie()} die Tabletten unregelmäßig "
                f"eingenommen.",
                f"According to {who_en}, {self.she()} had taken the tablets irregularly.")

    def sentences(self, n):
        """n ≥ 4 sentence pairs: intro, onset, action, outcome, plus n − 4 optional ones."""
        r = self.rng
        optional = ["background", "second", "measurement", "measurement", "reporting",
                    "reporting", "reporting"]
        extra = sorted(r.sample(range(len(optional)), n - 4))
        kinds = [optional[i] for i in extra]
        out = [self.intro()]
        if "background" in kinds:
            out.append(self.background())
        out.append(self.onset_sentence())
        if "second" in kinds:
            out.append(self.second_symptom())
        for _ in range(kinds.count("measurement")):
            out.append(self.measurement())
        out.append(self.action())
        out.append(self.outcome())
        used = set()
        for _ in range(kinds.count("reporting")):
            out.append(self.reporting(used))
        assert len(out) == n
        return out


def generate():
    """Return {split: [(report_id, de, en), ...]} for the splits in SIZES."""
    rng = random.Random(SEED)
    people = [Person(f, s, True) for f in FEMALE_FIRST for s in SURNAMES]
    people += [Person(f, s, False) for f in MALE_FIRST for s in SURNAMES]
    rng.shuffle(people)  # each report draws fresh, never-reused people
    splits = {}
    index = 0
    earlier = set()  # (de, en) of the splits already written
    for split, size in SIZES:
        pairs = []
        while len(pairs) < size:
            remaining = size - len(pairs)
            n = rng.randint(4, 8)
            if n > remaining:
                n = remaining
            elif 0 < remaining - n < 4:  # never leave a remainder too small for a report
                n = remaining if remaining <= 10 else remaining - 4
            patient, reporter, doctor = people.pop(), people.pop(), people.pop()
            report = Report(rng, index, patient, reporter, doctor)
            report_id = f"report{index:03d}"
            # a template without a name or number ("She recovered without lasting
            # effects.") can give a pair an earlier split already holds: leave it out,
            # so the test pairs are never training pairs (a held-out set that is held
            # out); the next report fills the split up
            new = [(de, en) for de, en in report.sentences(max(n, 4))
                   if (de, en) not in earlier][:remaining]
            pairs.extend((report_id, de, en) for de, en in new)
            index += 1
        splits[split] = pairs
        earlier.update((de, en) for _, de, en in pairs)
    return splits


def write(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for split, pairs in generate().items():
        for lang, col in (("de", 1), ("en", 2)):
            path = os.path.join(out_dir, f"{split}.{lang}")
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                for pair in pairs:
                    f.write(pair[col] + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                        help="output directory (default: the directory of this script)")
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
