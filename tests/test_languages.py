"""Words-only search in the languages its users speak (issue 18).

Facts are written as a speaker of each language would note them, and asked as they
would ask: with another form of the key word (a plural, a tense, a case, an article,
a particle), in a script without spaces, mixing scripts, or with emoji. What is
checked is what a model reads: the entity of the first hit and its facts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import GraphMemory, MemoryScope, SearchNodesResult

from .conftest import FakeClock

pytestmark = pytest.mark.anyio

# One user's memory in eight languages: (language, entity, fact). Every question
# below is asked of all of it, so a match must beat the other languages' facts too.
FACTS = [
    ("fr", "Lucie", "a deux chevaux en pension près de Chartres"),
    ("fr", "Inès", "travaillait dans une boulangerie à Lyon"),
    ("de", "Familie Weber", "besitzt zwei Häuser am Bodensee"),
    ("de", "Jonas", "arbeitet seit März als Ingenieur in München"),
    ("ru", "Оля", "взяла в библиотеке книгу про Байкал"),
    ("ru", "Дима", "каждое утро выгуливает собаку у реки"),
    ("ar", "ليلى", "طبيبة أطفال بمستشفى الجامعة"),
    ("ar", "يوسف", "كتابه الجديد عن تاريخ الأندلس"),
    ("ar", "مدرسة النور", "المعلمون هناك صبورون جدا"),
    ("hi", "मीरा", "मीरा को किताबें पढ़ना बहुत पसंद है"),
    ("hi", "शर्मा जी", "दोनों लड़के दिल्ली में पढ़ते हैं"),
    ("ko", "지민", "주말마다 강아지를 데리고 한강 공원에 가요"),
    ("ko", "서연", "요즘 학교에서 밴드 동아리를 해요"),
    ("ja", "健太", "昨日、駅前のラーメン屋で餃子を食べた"),
    ("ja", "美咲", "東京大学で物理学を研究している"),
    ("zh", "李华", "最喜欢吃苹果，不太喜欢香蕉"),
    ("zh", "王芳", "在北京的一家医院当护士"),
]
FACT_OF = {entity: fact for _, entity, fact in FACTS}


async def _everyone(scope: MemoryScope) -> None:
    for _, entity, fact in FACTS:
        await scope.remember(entity=entity, facts=[fact])


def _names(result: SearchNodesResult) -> list[str]:
    return [hit.entity.name for hit in result.hits]


def _first_facts(result: SearchNodesResult) -> list[str]:
    """The facts of the first hit, as a model reads them; none when nothing was found."""
    return [o.text for o in result.hits[0].observations] if result.hits else []


async def _assert_first(scope: MemoryScope, query: str, entity: str, fact: str) -> None:
    result = await scope.search_nodes(query=query)
    assert _names(result)[:1] == [entity], f"{query!r} found {_names(result)}"
    assert fact in _first_facts(result)


# (the question, whose fact answers it): the key word asked in another form than the
# one stored, and no other word of the question in that fact (nor the entity's name).
OTHER_FORMS = [
    # French: a plural in -aux, and the imperfect asked in the present.
    pytest.param("Où est son cheval ?", "Lucie", id="fr-chevaux-cheval"),
    pytest.param("Où travaille-t-elle ?", "Inès", id="fr-travaillait-travaille"),
    # German: an umlaut plural, and a verb's infinitive.
    pytest.param("Wo steht ihr Haus?", "Familie Weber", id="de-Haeuser-Haus"),
    pytest.param("Wo möchte er arbeiten?", "Jonas", id="de-arbeitet-arbeiten"),
    # Russian: accusative stored, plural or nominative asked.
    pytest.param("Какие книги она читает?", "Оля", id="ru-knigu-knigi"),
    pytest.param("Какой породы собака?", "Дима", id="ru-sobaku-sobaka"),
    # Arabic: the feminine stored, the article asked; a possessive suffix stored;
    # a plural with its article stored, the bare singular asked.
    pytest.param("من الطبيب في العائلة؟", "ليلى", id="ar-tabiba-altabib"),
    pytest.param("متى صدر الكتاب؟", "يوسف", id="ar-kitabuhu-alkitab"),
    pytest.param("هل معلم الرياضيات صارم؟", "مدرسة النور", id="ar-almuallimun-muallim"),
    # Hindi: plural stored, singular asked (one word with its vowel signs).
    pytest.param("किताब किसने दी?", "मीरा", id="hi-kitaben-kitab"),
    pytest.param("उनका बड़ा लड़का क्या करता है?", "शर्मा जी", id="hi-ladke-ladka"),
    # Korean: the object particle stored, the subject particle or none asked.
    pytest.param("강아지가 몇 살이에요?", "지민", id="ko-gangajireul-gangajiga"),
    pytest.param("강아지 이름이 뭐예요?", "지민", id="ko-gangajireul-gangaji"),
    pytest.param("어느 학교에 다녀요?", "서연", id="ko-hakgyoeseo-hakgyoe"),
    # Japanese: the plain past stored, the polite form asked (okurigana); a word
    # out of a compound.
    pytest.param("普段は何を食べますか", "健太", id="ja-tabeta-tabemasu"),
    pytest.param("どこの大学ですか", "美咲", id="ja-tokyo-daigaku-daigaku"),
    # Chinese: a word inside a run of characters with no spaces.
    pytest.param("谁爱吃苹果？", "李华", id="zh-xihuan-chi-pingguo-chi-pingguo"),
    pytest.param("苹果", "李华", id="zh-xihuan-chi-pingguo-pingguo"),
    pytest.param("她在哪家医院工作？", "王芳", id="zh-yijia-yiyuan-najia-yiyuan"),
]


@pytest.mark.parametrize(("query", "entity"), OTHER_FORMS)
async def test_a_fact_is_found_by_another_form_of_its_word(
    alice: MemoryScope, query: str, entity: str
) -> None:
    await _everyone(alice)
    await _assert_first(alice, query, entity, FACT_OF[entity])


# Questions about something no fact mentions: no word of theirs, in any form, is in
# the memory (the CJK ones share no character with any fact either).
UNRELATED = [
    pytest.param("Quel temps fera-t-il demain ?", id="fr"),
    pytest.param("Wann fängt das Konzert an?", id="de"),
    pytest.param("Когда приедет бабушка?", id="ru"),
    pytest.param("أين تسكن أختك؟", id="ar"),
    # Split at its vowel signs, बिल्ली is ब, ल, ल, and कितनी क, त: consonants of
    # किताबें and दिल्ली.
    pytest.param("बिल्ली कितनी बड़ी थी?", id="hi"),
    pytest.param("언니 직업이 뭐야?", id="ko"),
    pytest.param("週末はどこへ行きますか", id="ja"),
    pytest.param("明天会下雨吗？", id="zh"),
]


@pytest.mark.parametrize("query", UNRELATED)
async def test_a_question_about_something_else_finds_nothing(
    alice: MemoryScope, query: str
) -> None:
    await _everyone(alice)
    result = await alice.search_nodes(query=query)
    assert _names(result) == []


async def test_a_hindi_question_never_returns_a_fact_of_other_words(alice: MemoryScope) -> None:
    """The issue's example: consonants cut out of other words are no match."""
    await alice.remember(entity="मीरा", facts=["किताबें पढ़ना पसंद है"])
    await alice.remember(entity="राहुल", facts=["रोज़ सुबह दौड़ने जाता है"])
    result = await alice.search_nodes(query="बिल्ली कितनी बड़ी थी?")
    assert _names(result) == []
    await _assert_first(alice, "किताब", "मीरा", "किताबें पढ़ना पसंद है")


# (the stored fact, the question): a word of one script glued to, or asked among,
# words of another.
MIXED_SCRIPTS = [
    pytest.param(
        "민준", "어제 애플스토어에서 iPhone 16을 샀다", "iPhone은 어디서 샀어?", id="ko-en"
    ),
    pytest.param("小张", "平时用Python写数据分析的脚本", "谁会用Python？", id="zh-en"),
    pytest.param("陽菜", "先週、新しいMacBookを買った", "MacBook", id="ja-en"),
]


@pytest.mark.parametrize(("entity", "fact", "query"), MIXED_SCRIPTS)
async def test_a_query_mixing_scripts_finds_its_fact(
    alice: MemoryScope, entity: str, fact: str, query: str
) -> None:
    await _everyone(alice)
    await alice.remember(entity=entity, facts=[fact])
    await _assert_first(alice, query, entity, fact)


async def test_a_french_question_names_a_japanese_entity(alice: MemoryScope) -> None:
    await _everyone(alice)
    await alice.remember(
        entity="鈴木花子", entity_type="personne", facts=["enseigne le japonais à Kyoto"]
    )
    await _assert_first(alice, "Que fait 鈴木さん ?", "鈴木花子", "enseigne le japonais à Kyoto")


# (the query, whose fact has it): each symbol is a term of its own, even two in a row.
SYMBOLS = [
    pytest.param("🍕", "Emma", id="pizza"),
    pytest.param("🍣", "Léo", id="sushi"),
    pytest.param("€", "Loyer", id="euro"),
    pytest.param("♥", "Mamie", id="heart-suit"),
    pytest.param("❤️", "Chloé", id="red-heart"),
]
SYMBOL_FACTS = {
    "Emma": "soirée pizza 🍕🍕 tous les vendredis",
    "Léo": "🍣 le dimanche avec sa sœur",
    "Loyer": "850 € par mois, charges comprises",
    "Abonnement": "9,99 $ par mois",
    "Mamie": "signe toujours ses cartes ♥",
    "Chloé": "❤️ les chats",
}


@pytest.mark.parametrize(("query", "entity"), SYMBOLS)
async def test_emoji_and_symbols_are_searched_as_themselves(
    alice: MemoryScope, query: str, entity: str
) -> None:
    for name, fact in SYMBOL_FACTS.items():
        await alice.remember(entity=name, facts=[fact])
    result = await alice.search_nodes(query=query)
    assert _names(result) == [entity]
    assert _first_facts(result) == [SYMBOL_FACTS[entity]]


# (the entity's full name, a fact of it, the question naming it by part or in
# another form): as people call each other, and as a sentence declines a name.
NAME_PARTS = [
    pytest.param("王小明", "在上海做软件工程师", "小明是做什么的？", id="zh-given-name"),
    pytest.param("山田太郎", "大阪に住んでいる", "山田さんの会社はどこ?", id="ja-family-name-san"),
    pytest.param("김민수", "부산에서 태어났어요", "민수 씨는 어디 살아요?", id="ko-given-name-ssi"),
    pytest.param("Екатеринбург", "родной город Вики", "Ты бывал в Екатеринбурге?", id="ru-a-case"),
]


@pytest.mark.parametrize(("name", "fact", "query"), NAME_PARTS)
async def test_a_name_is_found_by_part_or_form_of_it(
    alice: MemoryScope, name: str, fact: str, query: str
) -> None:
    await _everyone(alice)
    await alice.remember(entity=name, facts=[fact])
    await _assert_first(alice, query, name, fact)


async def test_a_russian_relation_type_is_found_by_another_form(alice: MemoryScope) -> None:
    await alice.relate(source="Анна", relation="работает в", target="Яндекс")
    await alice.relate(source="Анна", relation="дружит с", target="Олег")
    result = await alice.search_nodes(query="Где она работала раньше?")
    assert _names(result)[:1] == ["Анна"]
    first = result.hits[0]
    assert [(r.relation, r.target) for r in first.relations] == [("работает_в", "Яндекс")]


async def test_a_japanese_relation_type_is_found_inside_a_question(alice: MemoryScope) -> None:
    await alice.relate(source="山田太郎", relation="勤務先", target="任天堂")
    await alice.relate(source="山田太郎", relation="友人", target="佐藤健")
    result = await alice.search_nodes(query="勤務先はどこですか")
    assert _names(result)[:1] == ["山田太郎"]
    first = result.hits[0]
    assert [(r.relation, r.target) for r in first.relations] == [("勤務先", "任天堂")]


async def test_a_hindi_relation_type_keeps_its_vowel_signs(alice: MemoryScope) -> None:
    """Snake case joins the words of a relation type; it does not cut them at their
    vowel signs, and the type is found by another form of its verb."""
    await alice.relate(source="मीरा", relation="में पढ़ाती है", target="केंद्रीय विद्यालय")
    await alice.relate(source="मीरा", relation="की बहन", target="राधा")
    result = await alice.search_nodes(query="कौन पढ़ाता है?")
    assert _names(result)[:1] == ["मीरा"]
    first = result.hits[0]
    assert [(r.relation, r.target) for r in first.relations] == [("में_पढ़ाती_है", "केंद्रीय विद्यालय")]


# (the turns of a session about the subject, of one about something else, the
# question): recall finds the session, by another form of its word.
TURNS = [
    pytest.param(
        ["어제 강아지를 데리고 동물병원에 다녀왔어", "강아지는 이제 괜찮아요?"],
        ["회사 일이 많아서 이번 주 내내 야근했어"],
        "강아지가 아팠어?",
        id="ko",
    ),
    pytest.param(
        ["周末我们全家去爬长城了", "长城上人多吗？"],
        ["我最近在学做饭"],
        "什么时候去的长城？",
        id="zh",
    ),
    pytest.param(
        ["कल मैंने दो नई किताबें खरीदीं", "कौन सी किताबें लीं?"],
        ["आज सुबह से बारिश हो रही है"],
        "वह किताब कैसी थी?",
        id="hi",
    ),
    pytest.param(
        ["اشتريت سيارة جديدة الأسبوع الماضي", "مبروك! ما نوعها؟"],
        ["الطقس حار جدا اليوم"],
        "أين السيارة؟",
        id="ar",
    ),
    pytest.param(
        ["В субботу ходили на концерт в филармонию", "Какой был концерт?"],
        ["Надо купить молоко и хлеб"],
        "Понравились концерты?",
        id="ru",
    ),
]


@pytest.mark.parametrize(("about", "other", "query"), TURNS)
async def test_recall_finds_the_turns_about_it(
    alice: MemoryScope, about: list[str], other: list[str], query: str
) -> None:
    roles = ["user", "assistant"]
    await alice.record_turns(
        session_id="s1", turns=[{"role": roles[i % 2], "text": t} for i, t in enumerate(about)]
    )
    await alice.record_turns(session_id="s2", turns=[{"role": "user", "text": t} for t in other])
    found = await alice.recall(query=query)
    assert found.turns, f"{query!r} recalled nothing"
    assert {turn.session_id for turn in found.turns} == {"s1"}
    assert found.turns[0].text in about


# English is unchanged: its word forms still match, and stop words alone still search.
async def test_english_word_forms_still_match(alice: MemoryScope) -> None:
    await _everyone(alice)
    await alice.remember(entity="Sam", facts=["runs 5k every morning"])
    await alice.remember(entity="Priya", facts=["studies Japanese at night"])
    await alice.remember(entity="Tom", facts=["meets his sister at the café on Main Street"])
    await _assert_first(alice, "who is running today?", "Sam", "runs 5k every morning")
    await _assert_first(alice, "what is she studying?", "Priya", "studies Japanese at night")
    await _assert_first(alice, "which cafe?", "Tom", "meets his sister at the café on Main Street")


async def test_english_stop_words_alone_still_search(alice: MemoryScope) -> None:
    await _everyone(alice)
    await alice.remember(entity="The Who", entity_type="band", facts=["saw them live in 1979"])
    result = await alice.search_nodes(query="The Who")
    assert _names(result)[:1] == ["The Who"]


async def test_a_default_language_stems_short_text_in_it(db_path: Path, clock: FakeClock) -> None:
    """One word is too few to tell its language: the memory's default language
    stems it, stored and asked. "animal" is an English word too, which English
    stems as "anim"; French stems it as it stems "animaux"."""
    async with GraphMemory.open(db_path, clock=clock, embedder="none", language="fr") as mem:
        scope = mem.scope(app="a", user="u")
        await scope.remember(entity="Règlement", facts=["animaux interdits"])
        await scope.remember(entity="Voisin", facts=["piano le soir"])
        await _assert_first(scope, "animal", "Règlement", "animaux interdits")
