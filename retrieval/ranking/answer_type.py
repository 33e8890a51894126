"""What a question asks for, and whether an item can hold it: answer-type filtering.

The relevance model scores how much an item is *about* the question, from cosines and shared
words. It cannot tell a topic from an answer: for "how old is tess?" the messages about Tess
the dog score like answers, and for "what's my mum's name?" so does "my dad's name is salvo".
Question-answering systems have long narrowed candidates by the type of answer a question
expects; this module does the same for the few types a person's memories hold and a regular
expression can recognise in lowercase chat: an age, an amount of money, a weight, a duration,
a number, a job, a name, a person named by their relation to the user ("my sister", "my lead"), and
the thing a "do i have ...?" asks about. A question of no such type (most of them) is not
filtered. "How many", "how long" and "when" are not types here: the answer is often counted
across items, or read from the dates things were said, rather than written in one item.

``expected(query)`` reads the question once; ``holds(expectation, text)`` says whether a text
can answer it. An item that cannot is not returned (``engine`` applies it with the relevance
cut; the LLM judge, when it runs, decides instead). Each pattern errs towards keeping: a false
"holds" costs an unanswerable question its empty answer, a false "does not" costs an answer.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_NUMBER_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    r"a couple|a few|several|dozens?|half|once|twice|both|twins|triplets|single|a hundred"
)
_NUMBER = rf"(?:\d|\b(?:{_NUMBER_WORDS})\b)"


# Each answer type: the question's words that ask for it, and what a text holding one shows.
_TYPES: dict[str, tuple[str, str]] = {
    "age": (
        r"\bhow old\b|\bwhat age\b|\bwhose age\b",
        # "4 yr old", "she's 7", "turns 7", "6 weeks old"; "rest for 2 weeks" is no age.
        rf"{_NUMBER}[\s-]*(?:yrs?|years?|y/?o)\b|{_NUMBER}[\s-]*(?:months?|mos?|weeks?|wks?|days?)[\s-]*old\b"
        rf"|\bage[ds]?\b|\bturn(?:s|ed|ing)?\s+{_NUMBER}|\b(?:is|she's|he's|they're|i'm|am|are)\s+{_NUMBER}"
        r"|\bborn\b|\bbirthday\b|\bnewborn\b|\btoddler\b",
    ),
    "money": (
        r"\b(?:salary|salaries|price|rent|budget|loan|debt|mortgage|fee|fees|income|wage|wages)\b"
        r"|\bhow much\b.*\b(?:cost|costs|costed|pay|paid|earn\w*|spen[dt]|sav(?:e|ing)|charge[sd]?|owe)\b"
        r"|\b(?:what|how much) did (?:it|\w+) cost\b|\b(?:a|my|his|her|their|pay) raise\b",
        # Chat states amounts bare ("cost 430", "budget around 2500"): any number of two digits.
        rf"[£$€¥]\s?\d|\d\d|\d[\d,.]*\s?(?:k|m|grand|quid|pounds?|dollars?|euros?|bucks|usd|eur|gbp|p/?h)\b|\d\s?%"
        rf"|\bper cent\b|\bpercent\b|\b(?:free|nothing)\b|{_NUMBER}\s+(?:grand|quid|pounds?|dollars?|euros?|bucks)\b",
    ),
    "weight": (
        r"\bweigh(?:s|ed)?\b(?!\w)|\bhow heavy\b|\bwhat(?:'s| is) (?:my|\w+'s|the) weight\b",
        r"\d[\d.]*\s?(?:kg|kgs|kilos?|kilograms?|lbs?|pounds?|stone|st|g|grams?|oz)\b|\bstone\b|\bkilos?\b",
    ),
    "duration": (
        r"\b(?:best|fastest|pb|personal best|record|finishing|finish)\b.*\btime\b",
        rf"{_NUMBER}[\s-]*(?:s|secs?|seconds?|mins?|minutes?|hrs?|hours?|h|days?|weeks?|wks?|months?|years?|yrs?|ish)\b"
        r"|\d+:\d\d|\bsince\b|\bhalf an hour\b|\ban hour\b|\ba (?:day|week|month|year)\b",
    ),
    "number": (
        # "goal" is no such word: "my goal is to learn spanish".
        r"\b(?:number|target|limit|quota)\s*\??\s*$|\bhow (?:far|tall|fast|high|deep)\b",
        # "flat 12", "140g a day", "10k steps", "5km"; "4x a week" is a count, no value.
        r"(?<![\w.])\d+(?:[.,]\d+)?(?:k|g|kg|km|mi|m|cm|mm|ml|l|h|hrs?|mins?|kcal|cal|%)?(?![\w])",
    ),
    "job": (
        r"\b(?:occupation|profession|for a living|for work)\b|\bjob(?: title)?\s*\??\s*$"
        r"|\bwhat (?:does|do) \w+(?:'s)?(?: \w+)? do\s*\??\s*$|\bwhat do i do\b|\bwhat is \w+'s job\b",
        r"\b(?:job|jobs|work|works|working|worked|career|employ\w*|hired|promoted|promotion|role|title|position|"
        r"retired|unemployed|freelanc\w*|self-employed|intern\w*|student|studying|studies|offer|company|startup|"
        r"business|shifts?|office|firm|agency|hospital|school|university|uni|clinic|nurse|doctor|chef|vet|cook|"
        r"barista|pilot|surgeon|midwife|paramedic|ceo|cto|founder|lead|head|staff|senior|junior|for a living|"
        r"sre|devops|ux|qa|teach|teaches|teaching|tutor\w*)\b"
        # Where people say they work rather than what they are: "i do 3d modelling at a game studio".
        r"|\bat (?:an?|the|my)\s+(?:[\w-]+\s+){0,3}(?:studio|bistro|restaurant|bakery|shop|cafe|salon|lab|kitchen|"
        r"warehouse|factory|garage|newsroom)\b"
        r"|\b\w+(?:er|or|ist|ian|ant|ent|eer|ee|ive|man|woman|person|smith|wright)s?\b(?= (?:at|in|for)\b)"
        r"|\b(?:an?|as)\s+(?:\w+\s+)?\w+(?:er|or|ist|ian|ant|ent|eer|ive|man|woman)\b",
    ),
}

# People named by their relation to the user: a question about "my mum" is answered only by a
# text that speaks of her. Animals and things are left out: "my bird" is answered by "my
# parrot kiwi", and no list of hypernyms would be complete.
_RELATIONS: tuple[tuple[str, ...], ...] = (
    ("mum", "mom", "mother", "mam", "mummy", "mommy", "ma", "parents", "parent", "family"),
    ("dad", "father", "papa", "daddy", "pops", "parents", "parent", "family"),
    (
        "partner",
        "wife",
        "husband",
        "girlfriend",
        "boyfriend",
        "gf",
        "bf",
        "fiance",
        "fiancé",
        "fiancee",
        "fiancée",
        "spouse",
        "hubby",
        "missus",
    ),
    ("brother", "bro", "brothers", "sibling", "siblings", "twin", "family"),
    ("sister", "sis", "sisters", "sibling", "siblings", "twin", "family"),
    ("son", "sons", "kid", "kids", "child", "children", "boy", "boys", "baby", "twins", "toddler", "family"),
    (
        "daughter",
        "daughters",
        "kid",
        "kids",
        "child",
        "children",
        "girl",
        "girls",
        "baby",
        "twins",
        "toddler",
        "family",
    ),
    ("grandma", "gran", "granny", "nan", "nana", "grandmother", "grandparents", "family"),
    ("grandpa", "grandad", "granddad", "grandfather", "grandparents", "family"),
    ("aunt", "auntie", "aunty"),
    ("uncle",),
    ("cousin", "cousins"),
    ("niece", "nieces"),
    ("nephew", "nephews"),
    ("manager", "boss", "lead", "supervisor", "skip"),
    ("therapist", "counsellor", "counselor", "psychologist", "psychiatrist"),
    ("doctor", "gp", "dr", "consultant", "specialist"),
    ("dentist",),
    ("landlord", "landlady"),
    ("flatmate", "roommate", "housemate", "flatmates", "roommates", "housemates"),
    ("neighbour", "neighbor", "neighbours", "neighbors"),
    ("colleague", "coworker", "co-worker", "colleagues", "coworkers", "teammate", "teammates"),
    ("friend", "mate", "buddy", "pal", "bestie", "bff", "friends", "mates"),
    ("coach", "trainer", "pt", "instructor"),
    ("tutor",),
)
# A word in several groups asks for any of them: "my kids" are answered by "my son" and by "my
# daughter", "my parents" by "my mum" and by "my dad".
_ALIASES: dict[str, frozenset[str]] = {}
for _group in _RELATIONS:
    for _word in _group:
        _ALIASES[_word] = _ALIASES.get(_word, frozenset()) | frozenset(_group)
_RELATION_QUESTION = re.compile(
    # "my mum", and an agent's third person: "the user's mum", "alice's mum".
    r"\b(?:my|our|\w+'s)\s+(?:(?:team|tech|line|new|old|best|little|big|older|younger|eldest|youngest|baby)\s+)?"
    r"(" + "|".join(sorted((re.escape(w) for w in _ALIASES), key=len, reverse=True)) + r")(?:'s|s')?\b"
)


# "what's my husband's name?", "what's the nursery called?": a name. In lowercase chat a name is
# seen by the words around it: "called", "her name's", "my husband tomas is ...", "the twins, eva
# and finn". The head noun asked about ("husband", "nursery") is read from the question so that
# "my husband tomas" counts and "the venue moved" does not. Software and media are left out: "i
# use obsidian" names an app with none of those words.
_NAME_QUESTION = re.compile(r"\b(?:name|names|named|called)\b")
_NOT_PERSONAL_NAMES = re.compile(
    r"\b(?:app|apps|tool|tools|software|program|editor|ide|book|books|show|series|film|movie|song|album|game|"
    r"podcast|website|site|channel|brand|model|library|framework|plugin|extension|font|theme|command|file)\b"
)
_HEAD = re.compile(
    r"\b(?:my|our|the|his|her|their|(?!(?:what|who|where|how|that|it|there|here)'s)\w+'s)\s+(?:[a-z-]+\s+)?"
    r"(?!(?:the|a|an|my|our)\b)(?P<head>[a-zé-]+?)(?:'s|s')?\s+(?:name|names|called|named)\b"
    r"|\bname of (?:my|our|the|his|her|their|\w+'s)\s+(?:[a-z-]+\s+)*?(?P<of>[a-zé-]+)\s*\??\s*$"
)
_ANIMAL_WORDS = (
    "pet pets dog dogs puppy pup cat cats kitten kittens bird birds budgie parrot rabbit rabbits bunny hamster "
    "fish horse pony tortoise turtle snake lizard gecko ferret greyhound collie lab labrador terrier spaniel "
    "poodle retriever pug beagle husky dachshund whippet"
)
_ANIMALS = frozenset(_ANIMAL_WORDS.split())
# Words that follow a noun without naming it: "my husband is", "the venue moved", "nursery in".
_GRAMMAR = (
    "is was are were be been has had have got gets get just really also finally always never still actually "
    "and or but who which that said says wants loves likes thinks lives works moved started starts start "
    "turned turns came comes went goes made makes took takes found told asked the a an this that my his her "
    "their our its in on at to for from with of about by into over after before will would can could should "
    "might must do does did not no so too very lol tho now again here there back home last next today "
    "tonight yesterday tomorrow up down out off near because"
)
_NOT_A_NAME = frozenset(_GRAMMAR.split())
_MONTHS_AND_DAYS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
)
# A capitalised word inside a sentence (LoCoMo writes names so; capture keeps a name it capitalised).
_CAPITALISED = re.compile(rf"(?<![.!?]\s)(?<!^)(?<!\()\b(?!(?:{_MONTHS_AND_DAYS}|I|I'm|I've|I'd|I'll)\b)[A-Z][a-z]+")
_NAME_WORDS = re.compile(r"\b(?:name|names|name's|named|called|calls|calling (?:him|her|it|them)|goes by)\b")
# "my kids, mia and leo", "the twins start nursery in april, eva and finn".
_NAME_LIST = re.compile(r",\s*[a-z]{2,}\s+(?:and|&)\s+[a-z]{2,}\s*(?:$|[.!;)])")


# "do i have high cholesterol?" is answered by a text that speaks of cholesterol; "do i have any
# medical conditions?" names a class, which the answer names by its member.
_HAVE_QUESTION = re.compile(
    r"^\s*(?:do|does|did) (?:i|we|\w+) (?:have|get|suffer from) (?:an? |any )?([a-z' -]+?)\s*\??\s*$"
)
_CLASSES = (
    "any other medical health dietary diet food conditions condition problems problem issues issue illnesses illness "
    "diseases disease pets pet kids kid children child siblings sibling plans plan hobbies hobby things thing "
    "restrictions requirements allergies allergy intolerances intolerance injuries injury symptoms meds "
    "medication medications preferences"
)
_CLASS_WORDS = frozenset(_CLASSES.split())


@dataclass(frozen=True)
class Expectation:
    """What a question asks for: an answer type (or none), the relations it names, the words a
    yes/no question asks about (as 5-letter stems), and for a name the nouns it may follow."""

    kind: str | None = None
    relations: tuple[frozenset[str], ...] = ()
    stems: tuple[str, ...] = ()
    # For a name: the nouns a name may follow ("husband" and its synonyms, every animal for "dog").
    subjects: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return self.kind is not None or bool(self.relations) or bool(self.stems)


_ISO_DATE = re.compile(r"\(?\b\d{4}-\d\d(?:-\d\d)?\b\)?")
_COMPILED = {name: (re.compile(ask), re.compile(hold)) for name, (ask, hold) in _TYPES.items()}


_QUESTION = re.compile(
    r"\?|^\s*(?:what|what's|whats|who|who's|whos|whose|when|when's|where|where's|which|how|do|does|did|is|are|am|"
    r"was|were|can|could|have|has)\b"
)


def expected(query: str) -> Expectation:
    """The answer type a question asks for and the relations it names; falsy when neither, and
    for a turn that asks nothing ("my salary went up!" is no question about a salary)."""
    text = query.lower().replace("’", "'")
    if not _QUESTION.search(text):
        return Expectation()
    kind = next((name for name, (ask, _) in _COMPILED.items() if ask.search(text)), None)
    relations = [_ALIASES[match.group(1)] for match in _RELATION_QUESTION.finditer(text)]
    have = _HAVE_QUESTION.match(text)
    stems = [] if have is None else [w[:5] for w in re.findall(r"[a-z]{3,}", have.group(1)) if w not in _CLASS_WORDS]
    subjects: frozenset[str] = frozenset()
    if kind is None and _NAME_QUESTION.search(text) and not _NOT_PERSONAL_NAMES.search(text):
        kind = "name"
        head = _HEAD.search(text)
        word = None if head is None else head["head"] or head["of"]
        if word:
            subjects = _ALIASES.get(word, frozenset({word})) | (_ANIMALS if word in _ANIMALS else frozenset())
    # "do i have high cholesterol": the thing is the last word, "high" only qualifies it.
    return Expectation(kind=kind, relations=tuple(dict.fromkeys(relations)), stems=tuple(stems[-1:]), subjects=subjects)


def _names_someone(expectation: Expectation, original: str, lowered: str) -> bool:
    """Whether a text can hold the name asked for (see ``_NAME_QUESTION``)."""
    if _NAME_WORDS.search(lowered) or _CAPITALISED.search(original):
        return True
    if not expectation.subjects:
        return False
    beside = _near_subject(expectation.subjects).finditer(lowered)
    if any(_could_be_a_name(match["name"] or match["before"]) for match in beside):
        return True
    # A list of names after a comma speaks of people or animals, not of a place.
    return bool(expectation.subjects & (_ALIASES.keys() | _ANIMALS)) and bool(_NAME_LIST.search(lowered))


def _could_be_a_name(word: str) -> bool:
    return word not in _NOT_A_NAME and not word.endswith(("ed", "ing", "ly"))


@functools.cache
def _near_subject(subjects: frozenset[str]) -> re.Pattern[str]:
    """Where a name stands beside the noun asked of: "my husband tomas", "my lead is sam", "the
    venue is glenmore house", "tom, my brother, ..."."""
    nouns = "|".join(sorted(map(re.escape, subjects), key=len, reverse=True))
    return re.compile(
        rf"\b(?:{nouns})\s+(?:(?:is|was|'s)\s+(?:(?:the|a)\s+)?)?(?P<name>[a-zé'-]+)"
        rf"|\b(?P<before>[a-zé'-]+),\s+(?:my|our|the)\s+(?:[a-z-]+\s+)?(?:{nouns})\b"
    )


def holds(expectation: Expectation, text: str, *, message: bool) -> bool:
    """Whether a text can answer a question of this expectation.

    A memory names who it is about (capture writes "The user's sister ..."), so one about the
    asked relation names it. A ``message`` may say "she" for someone named a message earlier: it
    fails only when it names another relation and not the asked one.
    """
    # Capture writes the date a relative phrase meant, "(2026-02-17)": no amount or number.
    undated = _ISO_DATE.sub(" ", text.replace("’", "'"))
    lowered = undated.lower()
    if expectation.kind == "name":
        if not _names_someone(expectation, undated, lowered):
            return False
    elif expectation.kind is not None and not _COMPILED[expectation.kind][1].search(lowered):
        return False
    if expectation.stems and not all(stem in lowered for stem in expectation.stems):
        return False
    if expectation.relations:
        words = set(re.findall(r"[a-zé-]+", lowered))
        for group in expectation.relations:
            if words & group:
                continue
            if not message or words & _ALIASES.keys():
                return False
    return True
