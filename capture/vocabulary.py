"""The words the rule extractor reads by: people close to the user, health and diet, what a
project is made of, what a credential looks like. ``capture.rule_table`` builds its rules from them.
"""

from __future__ import annotations

import re

from capture.text import word_set

ICASE = re.IGNORECASE

PROFILE_NOUNS = word_set(
    """timezone zone name role title job team company employer editor ide os shell terminal laptop machine stack
    language languages pronouns handle username location city country background specialty specialisation
    specialization focus framework database setup workflow level experience birthday age anniversary hours
    schedule diet commute manager boss mentor colleague coworker teammate lead therapist doctor dentist landlord"""
)
PROFILE_ADJECTIVES = ("preferred", "favorite", "favourite", "main", "primary", "usual", "default", "native")
PETS = (
    r"(?:dogs?|cats?|pets?|pupp(?:y|ies)|kittens?|greyhounds?|labradors?|retrievers?|poodles?|terriers?|beagles?|"
    r"spaniels?|collies?|dachshunds?|huskies|husky|corgis?|hamsters?|rabbits?|bunn(?:y|ies)|parrots?|budgies?|"
    r"tortoises?|turtles?|guinea pigs?|horses?|ponies|pony|pugs?|chihuahuas?|whippets?|lurchers?|mutts?|"
    r"hens?|chickens?|goldfish|snakes?|lizards?|geckos?)"
)
FAMILY = (
    r"(?:kids?|children|child|sons?|daughters?|twins|wife|husband|partner|spouse|girlfriend|boyfriend|"
    r"fianc[ée]e?|mom|mum|mother|dad|father|parents|sisters?|brothers?|siblings|grandkids|grandchildren|"
    r"grandma|grandpa|grandmother|grandfather|aunt|uncle|cousins?|niece|nephew|in-laws|"
    rf"bab(?:y|ies)|newborn|toddler|{PETS})"
)
# People the user names outside the family: "my colleague june co-presented".
ACQUAINTANCES = (
    r"(?:colleague|co-?worker|manager|boss|teammate|mentor|(?:best\s+)?friend|therapist|doctor|neighbou?r|flatmate|"
    r"roommate|landlord|cofounder|co-founder)"
)
# What a household does together: "we" and "our" around these are the user's family, not the team.
HOUSEHOLD = re.compile(
    rf"\b(?:{FAMILY}|house|home|flat|apartment|condo|garden|backyard|kitchen|mortgage|rent|landlord|car|"
    r"wedding|honeymoon|anniversary|vacation|holiday|neighbou?rs?|adopted|pregnant|born|married|engaged|"
    r"dinner|groceries|weekend|moved)\b",
    ICASE,
)
HEALTH = (
    r"(?:diabetes|asthma|adhd|autism|dyslexia|coeliac|celiac|crohn's|ibs|arthritis|epilepsy|migraines?|"
    r"hypertension|high blood pressure|anxiety|depression|allerg(?:y|ies)|intolerances?|insomnia|tinnitus|"
    r"eczema|(?:a\s+)?(?:heart|thyroid|kidney|back|knee)\s+(?:condition|problem|injury)|disability|"
    r"(?:motion|travel|sea|car)[- ]?sickness|hay ?fever|panic attacks|chronic pain)"
)
STATE = (
    r"(?:vegan|vegetarian|pescatarian|pescetarian|gluten[- ]free|dairy[- ]free|lactose[- ]free|diabetic|"
    r"pregnant|left[- ]handed|right[- ]handed|colou?r[- ]?blind|deaf|hard of hearing|dyslexic|autistic|"
    r"epileptic|asthmatic|married|divorced|engaged|widowed|retired|sober|teetotal|kosher|halal|"
    r"(?:lactose|gluten|fructose|histamine|dairy)[- ]intolerant|allergic\s+to|unemployed|self[- ]employed|"
    r"between jobs|out of work|job hunting|on (?:maternity|paternity|parental|sick) leave)"
)
# What a diet or a body rules out: "i can't do dairy", "no red meat for me", "shellfish makes me ill".
FOODS = (
    r"(?:dairy|milk|cheese|lactose|gluten|wheat|eggs?|(?:tree\s+)?nuts?|peanuts?|shellfish|seafood|fish|"
    r"(?:red\s+)?meat|pork|beef|soy|sesame|sugar|salt|caffeine|coffee|alcohol|booze|spicy food|garlic|onions?)"
)
# Measures of the body a doctor reads: "my blood pressure is too high".
BODY_MEASURES = r"(?:blood pressure|cholesterol|blood sugar|iron levels?|vitamin d|heart rate|bmi)"
# What someone does for a living when said as "i do X for a company".
TRADES = (
    r"(?:engineering|marketing|design|accounting|bookkeeping|sales|research|consulting|nursing|admin|support|"
    r"operations|ops|hr|finance|analytics|recruiting|pr|comms|policy|devops|security|ux|qa|payroll|logistics|"
    r"copywriting|translation|tutoring|physio|physiotherapy|photography|plumbing|carpentry|catering)"
)
# A business someone runs, owns or works at.
BUSINESSES = (
    r"(?:business|company|bakery|shop|store|cafe|café|restaurant|bistro|studio|practice|agency|salon|clinic|farm|"
    r"bar|pub|gym|startup|start-up|consultancy|charity|nursery|food truck|b&b|bnb|firm|hospital|school|"
    r"university|uni|college|lab|hotel|warehouse|factory|garage|library|newspaper|magazine|bank|fintech|"
    r"non-?profit|ngo|council|ministry|supermarket|call cent(?:re|er)|office)"
)
# What someone is at work: "i'm the mobile lead", "the only ux designer".
ROLES = (
    r"(?:lead|manager|designer|engineer|developer|dev|head|director|owner|founder|co-?founder|cto|ceo|cfo|coo|"
    r"coordinator|admin|administrator|architect|analyst|editor|producer|chef|cook|nurse|teacher|tutor|"
    r"accountant|bookkeeper|receptionist|intern|consultant|researcher|scientist|writer|translator|"
    r"recruiter|pm|po|sre|tech lead|team lead|supervisor)"
)
# Verbs after "we" that narrate or wish rather than state how the team works.
NOT_CONVENTION_VERBS = word_set(
    """need want have had could should might may can will would did were was got went tried saw think thought
    know hope like love hate talked met discussed just still really are is am wonder guess feel felt said told
    asked looked found started finished fixed broke noticed learned learnt made"""
)
NOT_SCHEDULE_VERBS = word_set("need want think hope guess wish feel know mean love like hate am was wonder")
PROJECT_NOUNS = re.compile(
    r"\b(?:staging|production|prod|release|releases|deploys?|deployments?|builds?|ci|sprint|standups?|"
    r"code freeze|launch|repo|server|servers|cluster|pipeline|database|backend|frontend|api|service|services)\b",
    ICASE,
)
# "My AWS key is AKIA…": a credential's label with a value, however cut or masked.
SECRETISH = re.compile(
    r"\b(?:passwords?|passphrase|passcode|pin|api[ _-]?keys?|(?<!the )keys?(?!\s+(?:insight|takeaway|point|"
    r"learning|decision|question|idea|part|thing|lesson|difference|feature|benefit|factor|step))|tokens?|"
    r"secrets?|credentials?|connection string)\b(?:\s+\w+){0,2}?\s*(?:is|are|was|:|=)\s*"
    r"(?=\S*[\d…_/+=*-]|(?-i:[A-Z0-9]{4,}))",
    ICASE,
)
