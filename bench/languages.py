"""Voice-agent sentences in the ten languages the model speaks, generated from templates (Latin names, digits and
punctuation mixed in, as replies carry them), and the pieces an LLM streams them in."""
import functools
import random

from qwen_tts_client import protocol as p

SLOTS = dict(
    name=["李明", "王芳", "张伟", "Anna", "David", "佐藤", "田中", "Mike"], city=["北京", "上海", "深圳", "东京", "New York", "杭州"],
    item=["iPhone 15", "MacBook Pro", "Wi-Fi路由器", "USB-C充电器", "AirPods", "Model Y", "GPU服务器", "蓝牙耳机"],
    app=["微信", "支付宝", "App Store", "ChatGPT", "淘宝", "Zoom", "高德地图"], num=["3", "12", "25", "99", "1,200", "3.5"],
    time=["9:30", "10点", "下午3点", "明天上午", "周五晚上", "2024年5月1日", "12:45"],
    nom=["サトウ", "田中さん", "山田様", "John", "Emily", "鈴木部長", "佐々木さん"], lieu=["東京駅", "大阪", "渋谷", "京都", "New York", "横浜"],
    shohin=["iPhone 15", "ガイドブック", "ノートPC", "Wi-Fiルーター", "USB-Cケーブル", "コーヒーメーカー", "ｶﾞｲﾄﾞﾌﾞｯｸ"],
    jikan=["9時30分", "10:15", "午後3時", "明日の朝", "金曜日の夜", "2024年5月1日", "12:45"],
    apuri=["LINE", "Zoom", "Googleマップ", "Amazon", "楽天", "Slack", "YouTube"],
    kazu=["3", "12", "25", "99", "1,200", "3.5"],
)
EN_SLOTS = dict(       # apart, so that Chinese and Japanese draw the sentences they drew before English had slots
    who=["Anna", "David", "Mr. Lee", "Dr. Patel", "Emily", "Carlos", "Sarah"], place=["New York", "Chicago", "London",
    "Austin", "the downtown office", "Seattle"], thing=["MacBook Pro", "iPhone 15", "Wi-Fi router", "USB-C charger",
    "AirPods", "Model Y", "coffee maker"], tool=["the app", "Zoom", "Google Maps", "Slack", "your dashboard", "Outlook"],
    count=["3", "12", "25", "99", "1,200", "3.5"], when=["9:30 am", "10 o'clock", "3 pm", "tomorrow morning",
    "Friday evening", "May 1st, 2024", "12:45"],
)
TEMPLATES = {
    "zh": [
        "您好，{name}，您订购的{item}已经发货了，预计{time}送达。", "好的，我帮您查一下{city}明天的天气。",
        "请问您需要把{item}寄到{city}吗？", "{name}您好！您的账户余额还有{num}元，请注意及时充值。",
        "根据最新数据，{city}的房价上涨了{num}%，比去年同期高出不少", "没问题，我已经为您预约了{time}的会议，地点在{city}办公室。",
        "您可以打开{app}，在“我的订单”里查看物流信息。", "抱歉，{item}目前缺货，大约需要等待{num}天", "我们公司在{city}有{num}家门店，营业时间是早上9点到晚上10点。",
        "这款{item}的价格是{num}99元，现在下单还可以享受八折优惠！", "{name}说他{time}会到{city}，需要我提醒您吗？",
        "您的验证码是{num}，请在5分钟内输入，不要告诉任何人", "如果您遇到问题，可以通过{app}联系我们的客服团队，我们会尽快回复您。",
        "今天{city}的最高气温是{num}度，空气质量良好，适合出门散步", "我理解您的担心，不过{item}的保修期是{num}个月，您完全不用着急",
        "第一步，打开{app}；第二步，点击右上角的“设置”；第三步，选择“账户安全”。", "人工智能正在改变我们的生活方式，比如{app}就可以帮助我们自动整理日程",
        "请稍等，我正在为您查询从{city}到上海的高铁票，{time}还有{num}张余票", "您上个月一共消费了{num}笔，总金额为3,580元，比上上个月减少了12%",
        "好的，已经把{item}加入购物车了，还需要别的吗", "{name}，欢迎回来！您已经连续登录{num}天了，继续加油哦",
        "我们的客服热线是400-800-{num}00，工作日{time}之后也有人值班", "这个问题比较复杂，我建议您先重启{item}，然后再试一次",
        "为了保障您的账户安全，我们建议您开启双重验证（2FA）并定期修改密码", "您预订的酒店位于{city}市中心，距离地铁站只有{num}00米",
    ],
    "ja": [
        "こんにちは、{nom}。ご注文の{shohin}は本日発送いたしました。", "かしこまりました。{lieu}の明日の天気をお調べします",
        "{shohin}を{lieu}までお届けしてもよろしいでしょうか？", "{nom}、お待たせいたしました！残高は{kazu}円です。",
        "新しい{shohin}を本日発売しました。詳しくはウェブサイトをご覧ください", "{jikan}に{lieu}で会議を予約しました。よろしくお願いいたします",
        "{apuri}を開いて、「注文履歴」から配送状況をご確認いただけます。", "申し訳ございませんが、{shohin}は現在在庫切れで、入荷まで約{kazu}日かかります",
        "当店は{lieu}に{kazu}店舗あり、営業時間は午前9時から午後10時までです。", "こちらの{shohin}は{kazu}980円で、今ならポイントが2倍になります！",
        "{nom}は{jikan}に{lieu}に到着する予定ですが、リマインドしましょうか", "認証コードは{kazu}です。5分以内に入力してください",
        "ご不明な点がございましたら、{apuri}からサポートチームまでお気軽にお問い合わせください", "本日の{lieu}の最高気温は{kazu}度で、散歩にぴったりの天気です",
        "ご心配はもっともですが、{shohin}の保証期間は{kazu}か月ですので、ご安心ください", "まず{apuri}を開き、次に右上の「設定」をタップして、「アカウント」を選んでください",
        "人工知能は私たちの生活を大きく変えつつあり、{apuri}のようなサービスが予定を自動で整理してくれます", "少々お待ちください。{lieu}から東京までの新幹線は{jikan}発の便に{kazu}席の空きがあります",
        "先月のご利用は{kazu}件、合計3,580円で、前月より12%減少しました", "{shohin}をカートに追加しました。ほかに何かございますか",
        "{nom}、おかえりなさい！{kazu}日連続でログインしています", "サポート窓口の電話番号は0120-{kazu}0-456で、{jikan}以降も対応しております",
        "この問題は少し複雑なので、まず{shohin}を再起動してから、もう一度お試しください", "アカウントを守るため、二段階認証（2FA）を設定し、定期的にパスワードを変更することをおすすめします",
        "ご予約のホテルは{lieu}の中心部にあり、駅から徒歩{kazu}分です",
    ],
    "ko": ["안녕하세요, 주문하신 상품은 오늘 발송되었습니다. 내일 오후 3시쯤 도착할 예정입니다.",
           "죄송합니다만, 해당 제품은 현재 품절이라 약 12일 정도 기다리셔야 합니다.",
           "서울의 내일 날씨는 맑고 최고 기온은 25도입니다. 외출하기 좋은 날씨네요!"],
    "en": [
        "Hello, {who}! Your order of the {thing} shipped today and should arrive by {when}.",
        "Sure, let me check tomorrow's weather in {place} for you.", "Would you like the {thing} sent to {place}?",
        "Hi {who}, your balance is ${count}, so please top up soon.", "I'm sorry, the {thing} is out of stock; it "
        "should be back in about {count} days.", "No problem, I've booked the meeting for {when} at {place}.",
        "You can open {tool} and look under \"My orders\" to track the delivery.", "We have {count} stores in "
        "{place}, open from 9 am to 10 pm every day.", "This {thing} costs ${count}.99, and if you order now you "
        "get 20% off!", "{who} said they'd reach {place} by {when}; should I remind you?", "Your verification code "
        "is {count}: enter it within 5 minutes and don't share it with anyone.", "If anything goes wrong, reach our "
        "support team through {tool} and we'll get back to you quickly.", "Today's high in {place} is {count} "
        "degrees, with clean air, so it's a nice day for a walk", "I understand your concern, but the {thing} "
        "comes with a {count}-month warranty, so there's no rush", "First, open {tool}; second, tap \"Settings\" "
        "in the top right; third, choose \"Security\".", "AI is changing how we live: {tool}, for example, can "
        "sort out your calendar for you", "One moment, I'm checking trains from {place} to Boston; the {when} one "
        "still has {count} seats", "Last month you made {count} purchases totalling $3,580, 12% less than the "
        "month before", "Okay, I've added the {thing} to your cart. Anything else", "Welcome back, {who}! "
        "You've logged in {count} days in a row, keep it up", "Our hotline is 1-800-555-{count}00, and someone's "
        "on call after {when} on weekdays too", "This one's a bit tricky, so I'd suggest restarting the {thing} "
        "first and then trying again", "To keep your account safe, turn on two-factor authentication (2FA) and "
        "change your password regularly", "Your hotel is right in the center of {place}, just {count}00 meters "
        "from the subway",
    ],
    "de": ["Hallo! Ihre Bestellung wurde heute verschickt und kommt voraussichtlich am Freitag um 15 Uhr an.",
           "Es tut mir leid, dieser Artikel ist gerade nicht vorrätig; er sollte in etwa 12 Tagen wieder da sein.",
           "Morgen wird es in München sonnig bei höchstens 25 Grad, ideal für einen Spaziergang."],
    "fr": ["Bonjour ! Votre commande a été expédiée aujourd'hui et devrait arriver vendredi vers 15 h.",
           "Je suis désolé, cet article est en rupture de stock ; il devrait revenir d'ici 12 jours environ.",
           "Demain à Paris, il fera beau avec un maximum de 25 degrés, parfait pour une promenade."],
    "ru": ["Здравствуйте! Ваш заказ отправлен сегодня и прибудет в пятницу около 15:00.",
           "К сожалению, этого товара сейчас нет в наличии; он появится примерно через 12 дней.",
           "Завтра в Москве будет солнечно, до 25 градусов, отличный день для прогулки."],
    "pt": ["Olá! Seu pedido foi enviado hoje e deve chegar na sexta-feira por volta das 15h.",
           "Desculpe, esse item está esgotado no momento; deve voltar em cerca de 12 dias.",
           "Amanhã em São Paulo vai fazer sol, com máxima de 25 graus, ótimo para uma caminhada."],
    "es": ["¡Hola! Su pedido se envió hoy y llegará el viernes alrededor de las 15:00.",
           "Lo siento, ese artículo está agotado ahora mismo; volverá en unos 12 días.",
           "Mañana en Madrid hará sol, con una máxima de 25 grados, ideal para pasear."],
    "it": ["Ciao! Il tuo ordine è stato spedito oggi e dovrebbe arrivare venerdì verso le 15.",
           "Mi dispiace, questo articolo è esaurito; dovrebbe tornare disponibile tra circa 12 giorni.",
           "Domani a Roma ci sarà il sole, con una massima di 25 gradi, perfetto per una passeggiata."],
}
LANGUAGES = p.LANGUAGE_CODES
CHARACTER_PIECES = {"zh", "ja", "ko"}     # an LLM streams these 1-2 characters a token; the others a word a token


def sentences(lang: str, n: int, seed: int = 0) -> list[str]:
    """n distinct sentences (as many as the templates make, for the languages with fixed sentences)."""
    rng, seen = random.Random(seed), {}
    for _ in range(50 * n):
        template = rng.choice(TEMPLATES[lang])
        text = template.format(**{k: rng.choice(v) for k, v in (EN_SLOTS if lang == "en" else SLOTS).items()})
        seen.setdefault(text, None)
        if len(seen) == n:
            break
    return list(seen)


def pieces(text: str, lang: str, rng: random.Random, how: str = "chars") -> list[str]:
    """Chinese and Japanese 1-2 characters a piece; the others a word with the space before it. `how` "tokens": as a
    Qwen LLM streams it, a token a piece (the TTS tokenizer's BPE is the Qwen LLMs'), whole characters."""
    if how == "tokens":
        return llm_tokens(text)
    if lang in CHARACTER_PIECES:
        cuts, i = [], 0
        while i < len(text):
            cuts.append(text[i:i + rng.randint(1, 2)])
            i += len(cuts[-1])
        return cuts
    words = text.split(" ")
    return [words[0]] + [" " + w for w in words[1:]]


@functools.cache
def _tokenizer():
    from engine.models.qwen3_tts.text_tokenizer import TextTokenizer
    return TextTokenizer.load()


def llm_tokens(text: str) -> list[str]:
    """The text's BPE tokens, a token that ends inside a character (UTF-8) joined to the next."""
    tokenizer, out, held = _tokenizer(), [], []
    for token_id in tokenizer.encode(text):
        held.append(token_id)
        piece = tokenizer.decode(held)
        if "\ufffd" not in piece:
            out.append(piece)
            held = []
    return out
