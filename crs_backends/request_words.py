"""The words and cues the request reader knows (:mod:`crs_backends.request_reader`), in one place.

Everything a person may say that the reader turns into a slot is listed here: the words for each catalog
genre (plain names, kinds, moods: "scary", "feel-good", "tear-jerker"), the cues of a ruled-out phrase
("not", "no", "never", "don't", "can't stand", "hate", "not into", "tired of", "anything but", "except",
"without", "no more", …) and what only looks like one ("I don't know", "not sure", "no problem"), the cues of
feelings about a title ("loved", "was boring", "already seen"), the patterns of a question about a film and of
the other acts, and the words of years ("nineties", "recent", "classic"). The names of titles and people come
from the catalog itself.
"""

from __future__ import annotations

import re

# -- genres: a word people use -> the catalog genres it asks for ----------------------------------------------

GENRE_WORDS: dict[str, tuple[str, ...]] = {
    # the genres by name, and their plurals
    "comedy": ("Comedy",),
    "comedies": ("Comedy",),
    "comedic": ("Comedy",),
    "horror": ("Horror",),
    "horrors": ("Horror",),
    "sci-fi": ("Sci-Fi",),
    "sci fi": ("Sci-Fi",),
    "scifi": ("Sci-Fi",),
    "science fiction": ("Sci-Fi",),
    "science-fiction": ("Sci-Fi",),
    "animated": ("Animation",),
    "animation": ("Animation",),
    "animations": ("Animation",),
    "cartoon": ("Animation",),
    "cartoons": ("Animation",),
    "anime": ("Animation",),
    "family": ("Family",),
    "family-friendly": ("Family",),
    "kid-friendly": ("Family",),
    "kids": ("Family",),
    "children": ("Family",),
    "kid": ("Family",),
    "child": ("Family",),
    "toddler": ("Family",),
    "toddlers": ("Family",),
    "little one": ("Family",),
    "little ones": ("Family",),
    "young ones": ("Family",),
    "romance": ("Romance",),
    "romances": ("Romance",),
    "romantic": ("Romance",),
    "love story": ("Romance",),
    "love stories": ("Romance",),
    "rom-com": ("Romance", "Comedy"),
    "rom-coms": ("Romance", "Comedy"),
    "romcom": ("Romance", "Comedy"),
    "romcoms": ("Romance", "Comedy"),
    "rom com": ("Romance", "Comedy"),
    "action": ("Action",),
    "action-packed": ("Action",),
    "adventure": ("Adventure",),
    "adventures": ("Adventure",),
    "thriller": ("Thriller",),
    "thrillers": ("Thriller",),
    "crime": ("Crime",),
    "heist": ("Crime",),
    "heists": ("Crime",),
    "gangster": ("Crime",),
    "gangsters": ("Crime",),
    "mafia": ("Crime",),
    "mob": ("Crime",),
    "mystery": ("Mystery",),
    "mysteries": ("Mystery",),
    "detective": ("Mystery",),
    "whodunit": ("Mystery",),
    "whodunnit": ("Mystery",),
    "war": ("War",),
    "western": ("Western",),
    "westerns": ("Western",),
    "cowboy": ("Western",),
    "cowboys": ("Western",),
    "musical": ("Musical",),
    "musicals": ("Musical",),
    "music": ("Music",),
    "documentary": ("Documentary",),
    "documentaries": ("Documentary",),
    "sport": ("Sport",),
    "sports": ("Sport",),
    "biography": ("Biography",),
    "biographical": ("Biography",),
    "biopic": ("Biography",),
    "biopics": ("Biography",),
    "true story": ("Biography",),
    "history": ("History",),
    "historical": ("History",),
    "fantasy": ("Fantasy",),
    "fairy tale": ("Fantasy",),
    "magic": ("Fantasy",),
    "drama": ("Drama",),
    "dramas": ("Drama",),
    "dramatic": ("Drama",),
    # kinds of film
    "zombie": ("Horror",),
    "zombies": ("Horror",),
    "slasher": ("Horror",),
    "slashers": ("Horror",),
    "haunted": ("Horror",),
    "ghost story": ("Horror",),
    "space": ("Sci-Fi",),
    "aliens": ("Sci-Fi",),
    "futuristic": ("Sci-Fi",),
    # moods
    "funny": ("Comedy",),
    "funnier": ("Comedy",),
    "fun": ("Comedy",),
    "hilarious": ("Comedy",),
    "laugh": ("Comedy",),
    "laughs": ("Comedy",),
    "feel-good": ("Comedy",),
    "feel good": ("Comedy",),
    "feelgood": ("Comedy",),
    "scary": ("Horror",),
    "scarier": ("Horror",),
    "scare": ("Horror",),
    "scares": ("Horror",),
    "creepy": ("Horror",),
    "spooky": ("Horror",),
    "frightening": ("Horror",),
    "terrifying": ("Horror",),
    "horrifying": ("Horror",),
    "tear-jerker": ("Drama",),
    "tear-jerkers": ("Drama",),
    "tearjerker": ("Drama",),
    "tearjerkers": ("Drama",),
    "tear jerker": ("Drama",),
    "weepy": ("Drama",),
    "sad": ("Drama",),
    "cry": ("Drama",),
    "suspense": ("Thriller",),
    "suspenseful": ("Thriller",),
    "thrilling": ("Thriller",),
    "tense": ("Thriller",),
}

# single words near a genre word by a letter or two that are English words, not misspellings ("sort of", "short")
NOT_MISSPELLINGS = frozenset(
    "sort spot short shorts prime crimes thrilled thrill scarf scare scars scarce sad said cry dry fry war was "
    "wars warm word horse mania manic comet comely dream dreams drams dram fancy fantasy famine spice slice space "
    "spacey hoist heart spots sports sporty magic music musics cartoon family famous history mystery actions "
    "auction fiction faction romantic romance tense tenses sense dense weeps weepy laughs laugh laughed".split()
)

# decades in words -> their first year
DECADE_WORDS: dict[str, int] = {
    "twenties": 1920,
    "thirties": 1930,
    "forties": 1940,
    "fifties": 1950,
    "sixties": 1960,
    "seventies": 1970,
    "eighties": 1980,
    "nineties": 1990,
    "noughties": 2000,
    "aughts": 2000,
}

OLD_UNTIL = 1979  # "old", "classic": up to this year
RECENT_YEARS = 10  # "recent", "newer": the catalog's newest year minus this
NOT_OLD_FROM = 1980  # "nothing too old": from this year

NUMBER_WORDS = {
    "few": 5,
    "couple": 2,
    "couple of": 2,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "fifteen": 15,
    "twenty": 20,
}

# words that say nothing about taste: a message made only of these (and stop words) asks for anything
GENERIC_WORDS = frozenset(
    """
movie movies film films flick flicks recommend recommendation recommendations suggest suggestion suggestions watch
watching watched like liked love loved want wanted good great nice best cool hi hello hey please thanks thank tonight
today help find looking look maybe kind sort anything ideas idea think know really pretty sure ok okay yes yeah just
new recent recently latest modern older old classic classics need tell bit lot time day night weekend evening right
seen saw already different else mood feel feeling year years ago decade decades ten five twenty something one ones
another stuff thing things girlfriend boyfriend wife husband friends friend date tomorrow enjoy enjoyed hate
hated fan favourite favorite genre genres type types style kinds sorts awesome perfect fine actually instead rather
""".split()
)

# a film for a young person of one's own: "for my son", "with my 8-year-old daughter", "for our little girl"
# (Family, as "for kids"); a stated age over YOUNG_AGE is not ("for my 16 year old son"), and "boy" / "girl" only
# with an age or "little" ("a movie with my girls" may be friends)
_KIN = r"sons?|daughters?|nephews?|nieces?|grandsons?|granddaughters?|grandkids?|grandchildren"
YOUNG_AUDIENCE = re.compile(
    r"\b(?:for|with)\s+(?:my|our)\s+"
    rf"(?:(?:(?P<age>\d{{1,2}})[\s-]*(?:years?|yrs?)[\s-]*old|little|young)\s+(?:boys?|girls?|{_KIN})|(?:{_KIN}))\b"
)
YOUNG_AGE = 12

# words of requests and reactions, for telling an English message from another language
REQUEST_WORDS = frozenset(
    """
directed director directors wrote writer written stars star starring plays played cast actor actors actress lead
about plot story premise year released release came come out made when who what why which how tell more boring
bored awful terrible horrible dull slow overrated stupid meh amazing fantastic brilliant excellent wonderful
hilarious incredible masterpiece loved liked hated disliked enjoyed adore adored favourite favorite fan fans seen
saw watched watch recommend suggest suggestion prefer rather anything everything nothing something bye goodbye
thanks thank cheers nah nope yeah yep yes hey hi hello please pls thx kids kid son daughter wife husband
""".split()
)

# -- ruled out: cues and their scope ---------------------------------------------------------------------------

# phrases that look like a cue but rule nothing out; blanked before the cues are read
NOT_NEGATIONS = re.compile(
    r"\b(?:do|does|did)\s*n['o]?t\s+(?:really\s+|even\s+)?(?:know|mind|care(?!\s+for)|matter|remember|worry"
    r"|think(?!\s+(?:i'?d|i\s+would|i'?ll|i\s+will|we'?d|she'?d|he'?d|they'?d)\s+(?:like|enjoy|love)))\b"
    r"|\b(?:not|n't)\s+(?:sure|bad|only|yet|that\s+bad|a\s+problem|really\s+sure)\b"
    r"|\bno\s+(?:idea|problem|problems|worries|rush|matter|clue|preference|strong\s+preference|pressure)\b"
    r"|\bwhy\s+not\b|\bif\s+not\b|\bnever\s+mind\b"
    r"|\b(?:can'?t|cannot|can\s+not|could\s*n'?t|could\s+not)\s+(?:wait|go\s+wrong|decide|choose|remember|think|find|recall)\b"
    r"|\bno\s*(?=[,.!?]|$)|\bnot\s+(?:that|this)(?:\s+one)?\b|\bnot\s+to\s+be\s+confused\s+with\b"
    r"|\bnothing\s+(?:compares|beats|tops)\b|\bnot\s+(?:as|so)\b|\bno\s+(?:one|body)\b|\bnobody\b",
    re.IGNORECASE,
)
# phrases whose object is no wish and no ruling-out either: blanked with it ("doesn't have to be new")
NO_SLOT = re.compile(
    r"\b(?:does|do|did)\s*n['o]?t\s+(?:have|need)\s+to\s+be\s+(?:a\s+|an\s+|too\s+|that\s+|very\s+)?[\w'-]+"
    r"|\b(?:i\s+)?(?:have|has|'ve)\s*n['o]?t\s+(?:seen|watched)\b"
    r"|\b(?:never|not)\s+(?:seen|watched|heard\s+of|saw)\b"
    r"|\b(?:did|do)\s*n['o]?t\s+(?:see|watch)\b",
    re.IGNORECASE,
)
# a cue that says the person does not like what follows (a title there is disliked)
_FEELING_CUES = (
    r"(?:do|does|did)\s*n['o]?t\s+think\s+(?:i'?d|i\s+would|i'?ll|i\s+will|we'?d|she'?d|he'?d|they'?d)\s+"
    r"(?:like|enjoy|love)\b|"
    r"(?:do|does|did)\s*n['o]?t\s+(?:really\s+|much\s+|particularly\s+|even\s+)?"
    r"(?:like|love|enjoy|want|care\s+for|dig|fancy|need)\b"
    r"|(?:can'?t|cannot|can\s+not|could\s*n'?t|could\s+not)\s+(?:stand|stomach|bear|take|deal\s+with|handle|get\s+into)\b"
    r"|(?:hate[sd]?|hating|dislike[sd]?|detest(?:ed|s)?|loathe[sd]?|despise[sd]?)\b"
    r"|not\s+(?:really\s+)?(?:a\s+)?(?:big\s+|huge\s+|great\s+|massive\s+)?fans?\s+of\b"
    r"|never\s+(?:really\s+)?(?:liked?|loved?|enjoyed?|cared\s+for|been\s+(?:a\s+)?(?:big\s+|huge\s+)?fans?\s+of"
    r"|been\s+into|watch(?:ed)?)\b"
    r"|not\s+(?:really\s+|too\s+|that\s+|very\s+)?(?:into|keen\s+on|interested\s+in|in\s+the\s+mood\s+for|feeling"
    r"|crazy\s+about|big\s+on)\b"
    r"|(?:tired|sick|fed\s+up|bored)\s+(?:of|with)\b|(?:had|have)\s+enough\s+of\b"
    r"|(?:'d|would|i'?d)\s+rather\s+not(?:\s+(?:watch|see|have))?\b"
)
# a cue that rules out what follows without a feeling about it ("no horror", "anything but", "without")
_PLAIN_CUES = (
    r"(?:anything|everything)\s+(?:but|except|other\s+than)\b|except(?:\s+for)?\b|other\s+than\b|apart\s+from\b"
    r"|without\b|no\s+more\b|no\s+longer\b|instead\s+of\b|rather\s+than\b|(?:avoid|skip)(?:ing)?\b"
    r"|nothing\b|never\b|not\b|no\b|none\s+of\b|(?:is|are|was|were)n'?t\b|less\b(?!\s+than)"
)
# "rather X than Y", "prefer X over Y": Y is ruled out
RATHER_THAN = re.compile(r"\b(?:rather|prefer\w*)\b[^,.;!?]{0,50}?\b(?:than|over)\b", re.IGNORECASE)
NEGATION_CUE = re.compile(rf"(?<![\w'])(?:(?P<feeling>{_FEELING_CUES})|(?P<plain>{_PLAIN_CUES}))", re.IGNORECASE)
# a ruling-out said after its object ("horror is not my thing", "musicals aren't for me")
NEGATION_AFTER = re.compile(
    r"\s+(?:is|are|was|were)(?:\s*n'?t|\s+not)\s+(?:really\s+|exactly\s+)?"
    r"(?:my|our|his|her|their)\s+(?:thing|cup\s+of\s+tea|style|jam|speed|kind\s+of\s+\w+|favou?rite)\b"
    r"|\s+(?:is|are|was|were)(?:\s*n'?t|\s+not)\s+(?:really\s+)?for\s+(?:me|us|her|him|them)\b",
    re.IGNORECASE,
)
# words that end the phrase a cue governs
SCOPE_ENDS = frozenset(
    "but though although however yet instead rather so because since while whereas unless then".split()
)
# words that end it once something has been ruled out ("no horror something funny")
SCOPE_SOFT_ENDS = frozenset(
    "something anything maybe perhaps preferably ideally just i i'd i'm id im we give how what show looking want "
    "prefer please more how similar that which who".split()
)
# words after "and"/"or" that start a new clause rather than continue the ruled-out list
CLAUSE_STARTS = frozenset(
    "i i'd i'm i'll id im we she he they it my our maybe something anything just also please give show how what "
    "would could can".split()
)
SCOPE_MAX_WORDS = 8
# words in a scope that do not count as ruled-out content
SCOPE_FILLER = frozenset(
    "a an the any more too really very much so of with by from like that those these kind kinds type types sort "
    "sorts stuff movie movies film films flick flicks one ones something anything at all either in it watch see "
    "see have anymore any more".split()
)

# -- feelings about a title -------------------------------------------------------------------------------------

# said before a title: liked it, or names it as the kind wanted ("something like Heat")
LIKED_BEFORE = re.compile(
    r"(?:\b(?:really\s+|absolutely\s+|just\s+)?(?:loved?|loves|liked?|likes|enjoyed?|enjoys|adored?|adores|dug)"
    r"|\bsimilar\s+to|\bsuch\s+as|\bespecially|\bparticularly|\bin\s+the\s+(?:vein|style)\s+of|\b(?:big\s+|huge\s+)?fans?\s+of"
    r"|\bfavou?rite(?:\s+(?:movie|film|one))?(?:\s+(?:ever|of\s+all\s+time))?\s+(?:is|was)"
    r"|\bthe\s+(?:best|greatest)\s+(?:movie|film)\s+(?:is|was))\s+$",
    re.IGNORECASE,
)
# said after a title
_THROUGH = r"(?:\s*,?\s*(?:but\s+|and\s+)?(?:it|that|which|this\s+one|that\s+one))?"
LIKED_AFTER = re.compile(
    _THROUGH + r"\s+(?:(?:is|was|'s)\s+(?:so\s+|really\s+|very\s+|pretty\s+|just\s+|absolutely\s+|such\s+)?"
    r"(?:great|good|amazing|awesome|fantastic|brilliant|excellent|wonderful|fun|funny|hilarious|perfect|incredible"
    r"|a\s+masterpiece|a\s+great\s+(?:movie|film)|one\s+of\s+(?:my|the)\s+(?:favou?rites?|best)|my\s+favou?rite)"
    r"|(?:is|was)\s+one\s+of\s+my\s+favou?rite)",
    re.IGNORECASE,
)
DISLIKED_AFTER = re.compile(
    _THROUGH + r"\s+(?:(?:is|was|were)\s+(?:so\s+|really\s+|very\s+|pretty\s+|just\s+|way\s+|kind\s+of\s+|kinda\s+)?"
    r"(?:a\s+)?(?:really\s+|very\s+|pretty\s+)?(?:boring|bad|awful|terrible|horrible|dull|slow|too\s+slow|too\s+long|overrated|stupid|meh|the\s+worst"
    r"|a\s+waste\s+of\s+time|disappointing|not\s+(?:good|great|for\s+me|that\s+good)|lame|silly|too\s+\w+\s+for\s+me)"
    r"|bored\s+me|sucked|was\s+not\s+my\s+thing|wasn'?t\s+(?:good|great|for\s+me|my\s+thing|that\s+good)"
    r"|(?:does|did)\s*n['o]?t\s+(?:really\s+)?(?:sound|look)\s+(?:good|interesting|great|fun))",
    re.IGNORECASE,
)
SEEN_BEFORE = re.compile(
    r"\b(?:(?:have|'ve|has|had)\s+)?(?:already\s+|just\s+|recently\s+)?(?:seen|saw|watched)\s+(?:already\s+)?$",
    re.IGNORECASE,
)
# a word before a title that makes "like" a comparison, not a feeling ("something like Heat")
COMPARISON = re.compile(r"\b(?:something|anything|more|another|one|ones|movies?|films?|stuff)\s+like\s+$", re.I)
# pronouns for the titles the system named last
REFERENCE = re.compile(
    r"(?<![\w'])(?P<many>both(?:\s+of\s+them)?|them|those(?:\s+two)?|all\s+of\s+them|all\s+three)"
    r"|(?<![\w'])(?P<one>it|that(?:\s+one)?|this(?:\s+one)?|the\s+(?:first|last)\s+one)(?![\w'])",
    re.IGNORECASE,
)
# verbs before such a pronoun: the feeling it carries
REFERENCE_VERB = re.compile(
    r"(?:(?P<seen>\b(?:seen|saw|watched)(?:\s+already)?)"
    r"|(?P<liked>\b(?:really\s+)?(?:loved|liked|enjoyed|adored|love|adore))"
    r"|(?P<disliked>\b(?:hated|disliked|hate|(?:do|did|does)\s*n['o]?t\s+(?:really\s+)?(?:like|love|enjoy)"
    r"|(?:can'?t|cannot|can\s+not|could\s*n'?t|could\s+not)\s+stand)))"
    r"\s+$",
    re.IGNORECASE,
)

# -- acts -------------------------------------------------------------------------------------------------------

_GENRE_ALTERNATIVES = "|".join(re.escape(w) for w in sorted(GENRE_WORDS, key=len, reverse=True))
_QUESTION_PATTERNS = (
    (
        "director",
        r"\bwho\s+(?:directed|made|did)\b|\bwho(?:'s|s|\s+is|\s+was)\s+(?:the\s+)?director\b"
        r"|\bdirector\s+of\b|\bwhich\s+director\b|\bwho\s+(?:is|was)\s+it\s+by\b|\bdirected\s+by\s+whom\b",
    ),
    (
        "writer",
        r"\bwho\s+wrote\b|\bwho(?:'s|s|\s+is|\s+was)\s+the\s+(?:screen)?writer\b"
        r"|\bwho\s+(?:is|was)\s+it\s+written\s+by\b",
    ),
    (
        "cast",
        r"\bwho(?:'s|s|\s+is|\s+was|\s+are|\s+were)?\s+(?:in|starring|starred|acting)\s+(?!the\s+mood)"
        r"|\bwho\s+(?:else\s+)?(?:stars|plays|acts)\b|\bwho\s+else\s+(?:is|was|are|were)\s+in\b"
        r"|\bthe\s+cast\b|\bwhich\s+actors?\b|\bwhat\s+actors?\b"
        r"|\bactors?\s+(?:in|of)\s+(?:it|that|this)\b"
        r"|\bwho\s+(?:is|was|are|were)\s+the\s+(?:main\s+|lead\s+)?(?:actors?|actress|actresses|stars?|leads?)\b",
    ),
    (
        "year",
        r"\bwhen\s+(?:did|was|is|were)\b.*\b(?:come\s+out|came\s+out|made|released?|out|filmed)\b"
        r"|\bwhat\s+year\b|\bwhich\s+year\b|\bhow\s+old\s+is\b|\brelease\s+date\b",
    ),
    (
        "plot",
        r"\bwhat(?:'s|s|\s+is|\s+was)\s+(?:it|that|this|that\s+one|this\s+one|the\s+(?:film|movie))\s+about\b"
        r"|\bwhat(?:\s+is|\s+was|'s|s)\s+.{1,60}?\s+about\b|\bwhat(?:'s|s|\s+is)\s+the\s+(?:plot|story|premise)\b"
        r"|\bthe\s+(?:plot|premise|synopsis)\b|\bwhat\s+happens\s+in\b",
    ),
    (
        "genre",
        r"\bwhat\s+(?:genre|kind|type|sort)\b(?:\s+of\s+(?:movie|film))?\s+is\b"
        r"|(?:^|[,.;!?]\s*)(?:is|was)\s+(?!there\b|any\b|anything\b)(?:it|that|this|.{1,60}?)(?:\s+one)?\s+(?:a\s+|an\s+)?"
        r"(?:very\s+|too\s+|really\s+|more\s+of\s+a\s+|kind\s+of\s+|at\s+all\s+)?"
        rf"(?:{_GENRE_ALTERNATIVES})\b"
        r"|\bis\s+it\s+(?:for\s+kids|kid-friendly|family-friendly)\b",
    ),
    ("why", r"^\s*why\b(?!\s+not\b)|\bwhy\s+(?:would|should|do\s+you|that|this|did\s+you|is\s+it)\b"),
    (
        "more",
        r"\btell\s+me\s+(?:more|about)\b|\bmore\s+about\b"
        r"|\b(?:is|was)\s+(?:it|that|this)(?:\s+one)?\s+(?:any\s+)?good\b"
        r"|\bis\s+.{1,60}?\s+any\s+good\b|\bis\s+it\s+worth\b|\bwhat\s+do\s+you\s+know\s+about\b",
    ),
)
# a question about a film, by what it asks (the first that matches wins)
QUESTIONS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (aspect, re.compile(pattern, re.IGNORECASE)) for aspect, pattern in _QUESTION_PATTERNS
)
ACCEPT = re.compile(
    r"^(?:ok(?:ay)?|k|cool|great|perfect|nice|awesome|excellent|wonderful|fantastic|brilliant|yes|yeah|yep|yup|sure"
    r"|sounds?\s+(?:good|great|perfect|nice|interesting|fun|awesome|cool)|that\s+sounds?\s+\w+|love\s+it"
    r"|i\s+love\s+it|that\s+works|(?:great|good|nice)\s+(?:choice|pick|idea|one)|i'?ll\s+(?:take|try)\s+(?:it|that)"
    r"|that\s+(?:one\s+)?looks?\s+\w+|looks?\s+(?:good|great|interesting)|interesting)\b",
    re.IGNORECASE,
)
REJECT = re.compile(
    r"^(?:(?:hmm+|um+|well|oh|ah|sorry)[,.!]*\s+)?(?:no|nope|nah|not\s+(?:that|this)(?:\s+one)?|not\s+(?:for\s+me|really|quite|interested|my\s+thing)"
    r"|i'?m\s+not\s+(?:interested|feeling\s+it|sure\s+about\s+(?:that|it))|pass|meh|hmm+,?\s*no)\b",
    re.IGNORECASE,
)
REQUEST = re.compile(
    r"\b(?:recommend\w*|suggest\w*|movies?|films?|flicks?|watch\w*|something|anything|another|more|else|ideas?"
    r"|options?|what\s+should|looking\s+for|in\s+the\s+mood|show\s+me|give\s+me|any\s+good)\b",
    re.IGNORECASE,
)
# a later request that replaces the genres or people asked before, or adds to them
CHANGE = re.compile(
    r"\b(?:instead|actually|rather|different|change|switch|now|second\s+thought|what\s+about|how\s+about)\b", re.I
)
ADD = re.compile(r"\b(?:too|also|as\s+well|more|both|plus|add|additionally|a\s+bit\s+of|a\s+touch\s+of|and)\b", re.I)
NEW_REQUEST = re.compile(r"\b(?:movies?|films?|flicks?)\b", re.IGNORECASE)

# -- people ---------------------------------------------------------------------------------------------------

# a word right before a name that says a person follows ("a fan of Nolan", "with Zorblax Quuxington")
PERSON_CUES = frozenset(
    "of with starring featuring by like love loves loved liked hate hated stand without except no not from and or "
    "nothing fan fans".split()
)
# catalog surnames that are also ordinary words: alone and in lower case they are the word ("is it long?"), unless
# a cue says a person follows ("a fan of long"? no: "films by Hardy", "Cage's movies")
SURNAMES_THAT_ARE_WORDS = frozenset(
    """
arch august bacon bale bell birch bird bloom blunt bolt brand bridges buck burns bush butler cage cannon cash chase
cook cooper craven crystal cube dash diesel frank frost gale garland grace grant gray green greene grey griffin hand
hardy hart hill holly hood hopper hurt idle irons judge keen lean long luke marks martin mason miner moss page peck
pike pine pitt polo potter price rains reed root rush saint savage shepherd shire snow southern spade stern strain
tally victor wade walker waters wedge west whale wise wolf young wood hunter king black stone field law park
""".split()
)
# words before a bare surname that are not a given name ("anything by Nolan", "no Tarantino")
NOT_GIVEN_NAMES = frozenset(
    "a an the any anything something by of with from starring featuring directed written like and or nor but no not "
    "fan fans mr mrs ms dr director actor actress films movies film movie stuff about i love hate stand".split()
)
