"""Words that say how a question is asked rather than what it is about, by language.

Dropped from queries only (never from the index), unless nothing else is left: a list
can grow without re-indexing a file. Han, kana and hangul entries are whole units
(a character, a kana run, a hangul word) as the analyzer cuts them.
"""

from __future__ import annotations

_LISTS = {
    "en": """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t d ll m re ve don didn doesn isn wasn weren won wouldn
    """,
    "fr": """
    a à au aux avec ce ces c cette d de des du elle elles en est et été eu il ils j je l la
    le les leur leurs lui m ma mais me mes moi mon n ne nos notre nous on ou où par pas pour
    qu que quel quelle quelles quels qui quoi s sa sans se ses son sont sur t ta te tes toi
    ton tu un une vos votre vous y comment combien quand pourquoi est-ce
    """,
    "de": """
    der die das den dem des ein eine einer eines einem einen und oder aber ist sind war waren
    hat haben hatte ich du er sie es wir ihr mich mir dich dir ihn ihm uns euch sein seine
    ihre in im an am auf aus bei mit nach von vom zu zum zur für um über unter nicht kein
    keine wo wer was wie wann warum welche welcher welches wohin woher
    """,
    "es": """
    el la los las un una unos unas y o pero de del al a en con por para sin sobre es son
    está están era fue ha han he su sus mi mis tu tus se le les lo me te nos que qué quien
    quién cual cuál como cómo cuando cuándo donde dónde cuanto cuánto cuántos cuántas
    porque por qué ella él ellos ellas yo
    """,
    "pt": """
    o a os as um uma uns umas e ou mas de do da dos das no na nos nas em com por para
    pelo pela sem sobre é são está estão era foi tem têm seu sua seus suas meu minha ele
    ela eles elas eu se lhe que quem qual quais como quando onde quanto quantos quantas
    porque
    """,
    "it": """
    il lo la i gli le un uno una e o ma di del della dei delle da dal in nel nella con su
    per tra fra è sono era ha hanno suo sua che chi cosa come quando dove quanto perché
    """,
    "nl": """
    de het een en of maar van in op aan met voor door bij naar is zijn was waren heeft
    hebben ik je jij hij zij wij ze die dat wat wie waar wanneer hoe waarom welke
    """,
    "ru": """
    и в во не что он она они оно на я с со как а то все так его ее её но да ты к у же вы
    за бы по ли из мне меня мы их о от кто где когда какой какая какие каким чем почему
    зачем сколько ли это этот эта эти был была были есть ему ей им
    """,
    "hi": """
    का की के को में से पर ने है हैं था थी थे हो और या भी तो ही यह वह ये वे इस उस इसे उसे
    उसने उसकी उसका उसके क्या कौन कौनसा कौनसी किस किसे किन कहाँ कहां कब कैसे कितना कितनी
    कितने क्यों सी सा से एक
    """,
    "ar": """
    في من إلى على عن مع هو هي هم أنا أنت نحن هذا هذه ذلك تلك التي الذي ما ماذا من متى
    أين كيف لماذا كم هل أي و أو ثم لا لم لن قد كان كانت
    """,
    "ja": """
    の は が を に で と も へ や か ね よ な だ です ます でした ました ですか ますか って
    から まで より どこ なに なん だれ 誰 何 いつ どう どんな どの どれ いる ある した
    している
    """,
    "ko": """
    뭐 뭘 무엇 무엇을 어디 어디에 어디야 어디서 언제 누구 누가 어떻게 왜 몇 얼마나 어느
    있어 있어요 있나요 있니 해 해요 했어 했어요 하나요 야 이야 이에요 예요 인가요 그 그는
    그녀 그녀는
    """,
    "zh": """
    的 了 吗 呢 吧 啊 么 什 哪 谁 怎 是 在 他 她 它 我 你 们 这 那 个 有 和 与 也 都
    什么 哪里 哪儿 怎么 为什么 多少 几
    """,
}

STOP_WORDS = {language: frozenset(words.split()) for language, words in _LISTS.items()}
