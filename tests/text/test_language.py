"""Language detection and the analyser chosen per language, on small multilingual fixtures."""

import pytest

from jkofast.text.language import CJK_PATTERN, detect_language, language_analyser
from jkofast.text.patterns import WORD

FIXTURES = {
    "arabic": [
        "تعتبر المكتبة الوطنية من أكبر المكتبات في المنطقة.",
        "يدرس الطلاب العلوم والرياضيات في الجامعة كل يوم.",
        "كان الطقس جميلا في المدينة خلال فصل الربيع.",
    ],
    "hindi": [
        "भारत एक विशाल देश है जिसमें अनेक भाषाएँ बोली जाती हैं।",
        "विद्यार्थी पुस्तकालय में किताबें पढ़ते हैं।",
        "गंगा नदी हिमालय से निकलती है।",
    ],
    "russian": [
        "Москва является столицей Российской Федерации.",
        "Студенты изучают математику и физику в университете.",
        "Зимой в Сибири очень холодно и много снега.",
    ],
    "french": [
        "Le chat dort sur le canapé pendant que les enfants jouent dans le jardin.",
        "La recherche scientifique est une activité qui demande de la patience.",
        "Nous allons au marché pour acheter des légumes et du pain.",
    ],
    "english": [
        "The cell membrane is a barrier that separates the interior of the cell from the environment.",
        "Vaccination is one of the most effective tools for the prevention of infectious diseases.",
        "This study was funded by the national institute of health.",
    ],
    "chinese": [
        "北京是中华人民共和国的首都。",
        "学生们在图书馆里认真地学习数学和物理。",
        "长江是中国最长的河流。",
    ],
}


@pytest.mark.parametrize("language", sorted(FIXTURES))
def test_detects_each_fixture(language):
    g = detect_language(FIXTURES[language])
    assert g.language == language
    assert g.share > 0.5
    assert language in g.describe()


def test_scripts_named():
    assert detect_language(FIXTURES["arabic"]).script == "arabic"
    assert detect_language(FIXTURES["hindi"]).script == "devanagari"
    assert detect_language(FIXTURES["russian"]).script == "cyrillic"
    assert detect_language(FIXTURES["chinese"]).script == "han"
    assert detect_language(FIXTURES["english"]).script == "latin"


def test_dominant_script_wins_in_a_mixed_corpus():
    mixed = FIXTURES["arabic"] * 5 + FIXTURES["english"]
    assert detect_language(mixed).language == "arabic"


def test_persian_told_from_arabic():
    fa = ["کتابخانه ملی ایران یکی از بزرگترین کتابخانه‌های منطقه است.", "دانشجویان هر روز در دانشگاه درس می‌خوانند."]
    assert detect_language(fa).language == "persian"


def test_max_chars_bounds_the_sample():
    texts = FIXTURES["french"] + FIXTURES["russian"] * 50
    assert detect_language(texts, max_chars=len(FIXTURES["french"][0])).language == "french"


def test_no_letters():
    g = detect_language(["123 456", ""])
    assert g.script is None and g.language is None and g.share == 0.0


def test_bad_input():
    with pytest.raises(TypeError):
        detect_language([b"bytes"])
    with pytest.raises(ValueError):
        detect_language("x", max_chars=0)


def test_analyser_per_language():
    pytest.importorskip("Stemmer")
    for lang in ("arabic", "hindi", "russian", "french"):
        an, why = language_analyser(lang)
        assert an.stemmer == f"snowball-{lang}" and an.stopwords is None
        assert lang in why
    an, _ = language_analyser("english")
    assert an.stemmer is None and an.stopwords is None and an.token_pattern == WORD
    an, _ = language_analyser("english", published_english=False)
    assert an.stemmer == "snowball-english"
    an, _ = language_analyser(None)
    assert an.stemmer is None


def test_chinese_analyser_one_token_per_ideograph():
    an, _ = language_analyser("chinese")
    assert an.token_pattern == CJK_PATTERN
    assert an.tokenize("长江是 river 河流") == ["长", "江", "是", "river", "河", "流"]


def test_stemmer_conflates_inflections():
    pytest.importorskip("Stemmer")
    an, _ = language_analyser("russian")
    assert an.tokenize("студенты студентов") == ["студент", "студент"]
    an, _ = language_analyser("french")
    assert an.tokenize("jouer joue") == ["jou", "jou"]


def test_retriever_params_per_language():
    pytest.importorskip("Stemmer")
    from jkofast.pools.retrievers import get_retriever, language_params

    assert language_params(FIXTURES["english"])[0] == {}
    assert language_params(FIXTURES["arabic"], "sgr")[0] == {}
    params, why = language_params(FIXTURES["russian"])
    assert params["analyzer"].stemmer == "snowball-russian" and "russian" in why
    docs = ["Студенты изучают математику", "Москва является столицей", "Зимой очень холодно"]
    r = get_retriever("bm25", **params).fit(docs)
    assert r.search(["студентов"], k=1)[0].tolist() == [[0]]  # the stemmer conflates the inflections
    with pytest.raises(ValueError):
        language_params(docs, "nope")
