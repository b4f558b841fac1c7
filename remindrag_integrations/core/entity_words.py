"""Closed word lists of the offline entity extractor (``core/extract_rules.py``): what may
not start or end an entity, abbreviations whose period does not end a sentence, particles that
join the words of one name, and words that never make an entity alone (months, weekdays,
nationality adjectives). General English, not fitted to any corpus."""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# closed-class words (and the commonest sentence-opening adverbs): a capitalised one at the
# start of a sentence or question is not part of a name ("The", "In", "However", "Which")
FUNCTION_WORDS = _words(
    """
    a an the this that these those some any each every no all both either neither such
    i me my mine we us our ours you your yours he him his she her hers it its they them their
    theirs one ones who whom whose which what where when why how whoever whatever whichever
    is are was were be been being am do does did done has have had having can could may might
    must shall should will would ought not
    in on at by for from with without of to into onto upon over under about above below after
    before during since until till while through throughout among between against across
    along around behind beyond near per via than as like unlike despite toward towards within
    and or but nor so yet if then else because although though unless whether whereas
    also however moreover furthermore meanwhile nevertheless nonetheless therefore thus hence
    instead otherwise indeed still later earlier today tomorrow yesterday currently originally
    eventually finally initially recently now here there once twice again just only even
    yes oh please according besides most many much few several more less other another own same
    """
)

# lowercase particles that join the words of one name ("Bank of America", "Ludwig van
# Beethoven", "Leonardo da Vinci"); "and" is not one ("Woodson Lake and Wood Hollow" is two)
NAME_PARTICLES = _words(
    "of the de du des la le les von van der den da di del della dos das do y al el bin ibn"
)

# English particles and heads that follow a name's hyphen ("Taliban-run", "Burnt-out"), some
# of a romanised syllable's shape: they end the name like any other English suffix; the
# function words above are read the same way
HYPHEN_ENGLISH = _words("out up off down back away run long")

# abbreviations written with a period that does not end the sentence ("St. Louis")
ABBREVIATIONS = _words(
    """
    mr mrs ms dr st mt ft jr sr sen rep gov gen col lt sgt capt cmdr adm maj cpl pvt rev fr
    prof hon pres supt insp messrs mme mlle sra sr no nos vol vols co corp inc ltd bros
    dept univ assn intl natl jan feb mar apr jun jul aug sep sept oct nov dec vs etc approx
    ave blvd rd
    """
)

# dates: months, weekdays and era markers ("the 1st century BC")
MONTHS_AND_DAYS = _words(
    """
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
    monday tuesday wednesday thursday friday saturday sunday
    bc ad bce ce
    """
)

# nationality, regional and religious adjectives: alone they describe ("a 1994 American
# film"); inside a longer name they stay ("American Civil War")
DEMONYMS = _words(
    """
    american british english scottish welsh irish french german italian spanish portuguese
    dutch flemish belgian swiss austrian swedish norwegian danish finnish icelandic polish
    czech slovak hungarian romanian bulgarian greek turkish russian ukrainian belarusian
    serbian croatian bosnian slovenian albanian macedonian lithuanian latvian estonian
    armenian azerbaijani israeli palestinian lebanese syrian iraqi iranian persian saudi
    egyptian moroccan algerian tunisian libyan nigerian ghanaian kenyan ethiopian somali
    sudanese ugandan tanzanian zimbabwean african indian pakistani bangladeshi nepalese
    sri lankan afghan chinese japanese korean vietnamese thai filipino indonesian malaysian
    singaporean taiwanese mongolian tibetan australian canadian mexican brazilian argentine
    argentinian chilean colombian peruvian venezuelan cuban jamaican haitian dominican
    puerto rican european asian arab arabic latin hispanic latino anglo soviet yugoslav
    scandinavian nordic celtic caribbean jewish christian catholic protestant muslim islamic
    hindu buddhist sikh orthodox californian texan south north east west northern southern
    eastern western central new zealander
    """
)
