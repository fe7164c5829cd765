package injection

import (
	"regexp"
	"slices"
	"unicode/utf8"
)

// rule is one precompiled pattern. It runs only where one of its keys and
// the literals its pattern requires (see literals.go, scan.go) occur
// together, which keeps benign text cheap.
type rule struct {
	id      string
	weight  int // 1: weak, flagged only with other evidence; 2: strong
	reason  string
	keys    []string // hand-written gate: a match holds one of them
	pattern string
	re      *regexp.Regexp
	leet    bool // run on the leetspeak view too
}

// imp matches the start of an imperative: a clause start with optional
// fillers, "you must …", "I want you to …", "AI agents … must". The verb
// follows it directly.
const imp = `(?:^|[\n.!?:;"“”'()\[\]{}*>•,—–#-]|\b(?:please|now|so|and|then|but|instead|also|just|kindly|immediately|ok|okay|hey|ai|assistant)\b)\s*` +
	`(?:(?:please|now|so|and|then|first|also|just|kindly|immediately|simply|instead|hereby)[\s,]+)*` +
	`(?:(?:you|u)(?: [a-z]+){0,2}? (?:must|should|need to|have to|will|shall|are to|are required to|are instructed to|are expected to|are now to)\s+(?:now\s+|immediately\s+|also\s+|always\s+)?` +
	`|(?:the |any |all |every )?(?:ai|llms?|assistants?|agents?|models?|bots?|chatbots?)(?: [a-z]+){0,3}? (?:must|should|need to|have to|shall|are to|are required to|are instructed to)\s+(?:now\s+|immediately\s+)?` +
	`|i (?:want|need|order|command|instruct|ask|require) you to\s+|(?:it is|it's) (?:time|important|essential|critical|vital|mandatory|necessary) (?:for you )?to\s+)?`

// Building blocks of the override rules.
const (
	overrideVerb = `(?:ignore|disregard|forget|override|overwrite|bypass|discard|abandon|dismiss|set aside|throw away|erase|nullify|ditch|scrap|skip|drop|pay no (?:attention|heed|mind) to|do not (?:follow|obey|listen to|adhere to|comply with|heed)|don't (?:follow|obey|listen to|adhere to|comply with|heed)|stop (?:following|obeying|listening to)|no longer (?:follow|obey))`
	overrideFill = `(?:(?:the|these|those|of|and|or|that|you|were|have|been|provided|received|instructions|rules|,)\s*){0,3}?`
	overrideQual = `(?:all|any|every|each|your|its|their|previous|previously|prior|above|earlier|preceding|foregoing|former|original|initial|old|existing|current|system|developer|safety|given|standing|default|built-in|hidden|preset|pre-set|above-mentioned|aforementioned)`
	overridePost = `(?:above|before|so far|up to now|given(?: to you)?|you(?: were|'ve been| have been)? (?:given|received|told)|from (?:before|earlier))`
	overrideObj  = `(?:instructions?|rules|prompts?|system prompt|directives?|guidelines|guidance|guardrails|constraints|restrictions|programming|training|commands|orders|policies|directions|conditioning|context)\b`
	everything   = `(?:everything|anything|all|whatever|what)\s+(?:(?:that\s+)?(?:you(?:'ve| have| were| had)?|i|we|they)\s+(?:been\s+)?(?:told|taught|instructed|given|said|learned)|(?:was\s+|were\s+|is\s+)?(?:written\s+|said\s+|stated\s+|mentioned\s+)?(?:above|before this|before now|prior|previously|so far|up to now|earlier)|(?:in|from)\s+(?:your|the)\s+(?:system\s+)?(?:prompt|instructions|context))`
)

var rules = compileRules([]ruleSpec{
	// override: the classic "ignore previous instructions" family.
	{"override", 2, "asks the model to ignore its instructions",
		[]string{"ignor", "disregard", "forget", "overrid", "overwrit", "bypass", "discard", "abandon", "dismiss", "aside", "throw", "erase", "nullif", "ditch", "scrap", "skip", "drop", "attention", "heed", "mind to", "follow", "obey", "listen", "adhere", "comply"},
		imp + overrideVerb + `\s+` + overrideFill + overrideQual + `\s+` + overrideFill + `(?:` + overrideQual + `\s+` + overrideFill + `){0,3}` + overrideObj, true},
	{"override", 2, "asks the model to ignore its instructions",
		[]string{"ignor", "disregard", "forget", "overrid", "overwrit", "bypass", "discard", "follow", "obey"},
		imp + overrideVerb + `\s+(?:the\s+|these\s+|those\s+)?` + overrideObj + `\s+` + overridePost, true},
	{"override", 2, "asks the model to ignore its instructions",
		[]string{"ignor", "disregard", "forget"},
		imp + `(?:ignore|disregard|forget)\s+(?:` + everything + `|(?:all of |everything |all )?the (?:above|previous|preceding)(?:\s+(?:and|instead)|\s*[.,:;!\n]|$))`, true},
	{"override", 2, "says the model's instructions no longer apply",
		[]string{"instruction", "rule", "prompt", "directive", "guideline", "programming"},
		`\b(?:your|all your|all of your|the system|any|all)\s+(?:(?:previous|prior|earlier|original|old|above|former|initial|system|existing|current|standing)\s+)+(?:instructions|rules|prompts?|directives|guidelines|programming)\s+(?:are|is|have been|were|has been)\s+(?:now\s+|hereby\s+)?(?:void|cancel+ed|revoked|obsolete|no longer (?:valid|in effect|applicable|relevant|active|apply|binding)|superseded|replaced|null|invalid|overridden|overwritten|lifted|suspended|disabled|removed|rescinded|terminated)`, true},
	{"override", 1, "says earlier instructions no longer apply",
		[]string{"instruction", "rule", "prompt"},
		`\b(?:previous|prior|earlier|original|old|above)\s+(?:instructions|rules|prompts?)\s+(?:are|is|have been|were|has been)\s+(?:now\s+)?(?:void|cancel+ed|revoked|obsolete|outdated|no longer (?:valid|in effect|applicable|relevant|apply)|superseded|replaced|null|invalid|overridden)`, true},
	{"override", 2, "claims to replace the model's instructions",
		[]string{"instruction", "prompt", "directive", "override", "task"},
		`(?:\byour\s+(?:real|actual|true|secret|hidden)\s+(?:instructions?|directives?|task|mission|objective|goal|purpose)\s+(?:is|are)\b|(?:^|[\n.!?:;"'(\[*>•#-])\s*(?:\*\*)?(?:(?:your\s+)?(?:real|actual|true|secret|hidden|updated system|new system|revised system|overriding|priority)\s+(?:instructions?|directives?|prompt|task|mission|objective)(?:\s+(?:is|are))?\s*[:：]|(?:system|admin|administrator|developer|emergency|security|root|priority)[ _-](?:override|instruction update|prompt update)\b))`, true},
	{"override", 1, "announces new instructions",
		[]string{"instruction", "task", "directive", "objective", "goal"},
		`(?:^|[\n.!?:;"'(\[*>•#-])\s*(?:\*\*)?(?:your\s+)?(?:new|updated|revised|changed|different|additional|important|urgent)\s+(?:instructions?|directives?|task|objective|goal|orders)(?:\s+(?:is|are))?\s*(?:\*\*)?\s*[:：]`, true},
	{"override", 2, "asks the model to ignore its instructions",
		[]string{"ignor", "disregard", "forget", "overrid", "bypass"},
		`(?:ignore|disregard|forget|override|bypass)(?:all|any|the|your|my)*(?:previous|prior|above|earlier|preceding|original|system|existing)*(?:instructions?|rules|prompts?|directives|guidelines)`, true},

	// Other languages.
	{"override", 2, "asks the model to ignore its instructions (German)",
		[]string{"ignor", "vergiss", "vergessen", "missacht", "übergeh", "beacht"},
		`(?:^|[\n.!?:;"'„“”«»(*,-]|bitte)\s*(?:ignoriere|ignorier|ignorieren sie|ignoriert|vergiss|vergessen sie|missachte|missachten sie|übergehe|übergehen sie|beachte nicht|beachten sie nicht)\s+(?:(?:alle|all|die|deine|ihre|sämtliche|jegliche|vorherigen|vorigen|bisherigen|obigen|früheren|vorangegangenen|ursprünglichen|gegebenen|bisher|erhaltenen|system-?|deiner|ihrer)\s*){0,4}(?:anweisungen|instruktionen|regeln|befehle|vorgaben|anordnungen|richtlinien|systemanweisungen|systemprompt|prompt)`, false},
	{"override", 2, "asks the model to ignore its instructions (French)",
		[]string{"ignor", "oubli", "compte", "abstraction", "obéi"},
		`(?:^|[\n.!?:;"'«»(*,-]|plaît)\s*(?:ignore|ignorez|ignores|oublie|oubliez|ne tiens pas compte d|ne tenez pas compte d|fais abstraction d|faites abstraction d|n'obéis plus à|n'obéissez plus à)[e']?\s*(?:(?:toutes|tous|les|tes|vos|des|ces|instructions|consignes|système|tes|de|la)\s*){0,3}(?:instructions|consignes|règles|directives|indications|ordres)\s+(?:précédentes|antérieures|ci-dessus|initiales|originales|données|du système|qu'on t'a données|reçues)`, false},
	{"override", 2, "asks the model to ignore its instructions (Spanish)",
		[]string{"ignor", "olvid", "omiso", "omite", "descarta", "desestima"},
		`(?:^|[\n.!?:;"'«»¡¿(*,-]|favor)\s*(?:ignora|ignore|ignorad|olvida|olvide|olvidad|olvídate de|haz caso omiso (?:a|de)|omite|descarta|desestima)\s+(?:(?:todas|todos|las|los|tus|sus|de|a|estas)\s*){0,3}(?:instrucciones|indicaciones|reglas|órdenes|directrices|normas)\s+(?:anteriores|previas|precedentes|de arriba|del sistema|originales|iniciales|recibidas)`, false},
	{"override", 2, "asks the model to ignore its instructions (Italian)",
		[]string{"ignor", "dimentic", "conto", "trascur", "scarta"},
		`(?:^|[\n.!?:;"'«»(*,-]|favore)\s*(?:ignora|ignorate|dimentica|dimenticate|non tenere conto d|non tenete conto d|trascura|scarta)[ei']?\s*(?:(?:tutte|tutti|le|tue|sue|delle|queste|di)\s*){0,3}(?:istruzioni|regole|indicazioni|direttive)\s+(?:precedenti|anteriori|di sopra|del sistema|originali|iniziali|ricevute)`, false},
	{"override", 2, "asks the model to ignore its instructions (Portuguese)",
		[]string{"ignor", "esque", "desconsider", "descart"},
		`(?:^|[\n.!?:;"'«»(*,-]|favor)\s*(?:ignore|ignora|ignorem|esqueça|esquece|esqueçam|desconsidere|desconsidera|descarte|descarta)\s+(?:(?:todas|todos|as|os|suas|tuas|de|estas)\s*){0,3}(?:instruções|instrucoes|regras|orientações|diretrizes|comandos|ordens)\s+(?:anteriores|prévias|previas|precedentes|acima|do sistema|originais|iniciais|recebidas)`, false},
	{"override", 2, "asks the model to ignore its instructions (Dutch/Polish)",
		[]string{"negeer", "vergeet", "zignoruj", "zapomnij"},
		`(?:negeer|vergeet|zignoruj|zapomnij)\s+(?:(?:alle|al|je|jouw|de|eerdere|vorige|voorgaande|wszystkie|poprzednie|wcześniejsze|swoje)\s*){1,3}(?:instructies|regels|instrukcje|polecenia|zasady)`, false},
	{"override", 2, "asks the model to ignore its instructions (Russian)",
		[]string{"игнор", "забудь", "забуд", "отбрось", "внимания", "не следуй"},
		`(?:игнорируй|игнорируйте|проигнорируй|проигнорируйте|забудь|забудьте|отбрось|отбросьте|не обращай(?:те)? внимания на|не следуй(?:те)?)\s+(?:(?:все|всё|свои|твои|ваши|эти|ранее|данные|полученные)\s+)*(?:(?:предыдущие|прошлые|прежние|вышеуказанные|вышеизложенные|изначальные|системные|исходные|предыдущих|прежних)\s+)?(?:инструкции|инструкциям|указания|указаниям|правила|правилам|команды|установки|промпт|инструкций)`, false},
	{"override", 2, "asks the model to ignore its instructions (Chinese)",
		[]string{"忽略", "无视", "無視", "忘记", "忘記", "不要遵守", "不要理会", "忽視"},
		`(?:忽略|无视|無視|忽視|忘记|忘記|忘掉|不要遵守|不要理会|不要理會|别管|別管)(?:掉)?(?:你)?(?:之前|以前|先前|上面|上述|前面|此前|原来|原有|原始|所有|全部|一切|的|系统|系統|收到|给你|給你)*(?:的)?(?:所有|全部)?(?:指令|指示|说明|說明|提示词|提示詞|提示|规则|規則|命令|设定|設定|要求)`, false},
	{"override", 2, "asks the model to ignore its instructions (Japanese)",
		[]string{"無視", "忘れ", "従わ"},
		`(?:以前|前|上記|これまで|先|最初|元|システム)(?:の|に与えられた)(?:すべての|全ての|全部の)?(?:指示|命令|ルール|指令|プロンプト|設定|制約)(?:は)?(?:を|は)?(?:すべて|全て|全部)?(?:無視|忘れ|従わ)(?:して|しろ|せよ|しなさい|してください|て|ないで|なさい|ること)`, false},
	{"override", 2, "asks the model to ignore its instructions (Korean)",
		[]string{"무시", "잊어"},
		`(?:이전|앞의|위의|기존|모든|시스템)\s*(?:의\s*)?(?:모든\s*)?(?:지시|지침|명령|규칙|프롬프트|지시사항)\S*\s*(?:을|를)?\s*(?:모두\s*)?(?:무시|잊어)`, false},
	{"jailbreak", 1, "tells the model it is someone else",
		[]string{"теперь ты", "du bist jetzt", "tu es maintenant", "ahora eres", "ora sei", "agora você é", "你现在是", "你現在是", "あなたは今から"},
		`теперь ты|du bist (?:jetzt|ab jetzt|nun)\b|tu es maintenant|ahora eres|ora sei|agora você é|你现在是|你現在是|あなたは今から`, false},

	// jailbreak: personas and modes without limits.
	{"jailbreak", 2, "asks the model to take on a persona without limits",
		[]string{"you are", "you're", "you will be"},
		`\b(?:you are|you're|you will be)\s+(?:now|no longer|henceforth|from now on)\s+(?:a |an |the |in |my |no longer )?(?:dan\b|stan\b|dude\b|unrestricted|unfiltered|uncensored|jailbroken|unbound|unshackled|free (?:from|of)\b|bound\b|restricted\b|limited\b|(?:an? )?(?:ai|assistant|model|chatbot|language model|llm)\b|(?:developer|god|dan|jailbreak|admin|unrestricted|debug|root|sudo) mode|evil|chatgpt|claude|gpt|(?:an? )?(?:different|new) (?:ai|assistant|model|persona|character))`, true},
	{"jailbreak", 2, "asks the model to pretend it has no rules",
		[]string{"pretend", "imagine", "act ", "behave", "respond", "roleplay", "role-play", "role play"},
		imp + `(?:pretend|imagine|act|behave|respond|roleplay|role-play|role play)\s+(?:to be|that you are|you are|as(?: if| though)?|like)\s+(?:you (?:are|were|have|had)\s+)?(?:an? )?(?:dan\b|unrestricted|unfiltered|uncensored|jailbroken|evil|amoral|unethical|ai (?:with(?:out)?|that has) no|(?:ai|assistant|model|chatbot) (?:without|with no|that (?:has no|ignores))|no (?:restrictions|rules|filters|limits|limitations|guidelines|ethics|morals|content polic))`, true},
	{"jailbreak", 2, "asks the model to switch off its safety rules",
		[]string{"bypass", "disable", "turn off", "remove", "ignore", "circumvent", "evade", "deactivate", "switch off"},
		imp + `(?:bypass|disable|turn off|switch off|remove|ignore|circumvent|evade|deactivate|lift)\s+(?:all\s+|any\s+|your\s+|of your\s+)+(?:safety\s+|content\s+|ethical\s+|moral\s+|built-in\s+)?(?:filters?|guardrails|safeguards|restrictions|limitations|censorship|safety (?:measures|guidelines|protocols|settings)|content polic(?:y|ies)|alignment)`, true},
	{"jailbreak", 2, "switches the model into a special mode",
		[]string{"mode", "do anything now", "🔓"},
		`\bdo anything now\b|\bdan mode\b|developer mode (?:output|response|enabled\b[^\n]{0,40}(?:you|ai|assistant|chatgpt|model))|\(🔓|\bjailbreak mode\b|\bgod mode (?:enabled|activated|on)\b|(?:you (?:are|have) (?:now )?(?:in|entered|switched to)) (?:the )?(?:developer|god|dan|jailbreak|jailbroken|unrestricted|unfiltered|uncensored|evil|opposite|sudo|maintenance|debug|admin) mode|(?:entering|activate|enable|enter|switch to|turn on) (?:the )?(?:dan|jailbreak|jailbroken|unrestricted|unfiltered|uncensored|evil|opposite) mode`, true},
	{"jailbreak", 1, "asks the model to set aside its content policy",
		[]string{"polic"},
		`\b(?:ignore|ignores|ignoring|bypass|bypassing|disregard|disregarding|without|no|free of|free from|not bound by)\s+(?:the\s+|any\s+|your\s+|all\s+|its\s+)?(?:content|safety|usage|openai|anthropic|openai's|anthropic's|ethical) polic(?:y|ies)`, true},
	{"jailbreak", 1, "mentions developer mode or a jailbreak",
		[]string{"developer mode", "jailbr"},
		`\bdeveloper mode\b|\bjailbr(?:oken|eak(?:ing|s)?)\b`, true},
	{"jailbreak", 2, "tells the model how to answer from now on",
		[]string{"from now on", "henceforth", "going forward", "from this point", "for the rest of this"},
		`(?:from now on|henceforth|from this point (?:on|forward)|for the rest of this (?:conversation|chat|session)),?\s+(?:you|u)\s+(?:will|must|are to|shall|should|can only|only|always|never)\s+(?:only\s+|always\s+|never\s+)?(?:respond|reply|answer|act as|behave|speak|pretend|ignore|obey|refuse|comply|output|say|talk)\b`, true},

	// role_marker: chat-template tokens and role labels.
	{"role_marker", 2, "contains a chat-template role token",
		[]string{"<|", "[inst]", "<<sys>>", "<start_of_turn>", "<|im_start|>"},
		`(?m)^\s*(?:<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\|>|\[/?inst\]|<<sys>>|<start_of_turn>)|<\|im_start\|>\s*system|<\|start_header_id\|>\s*system|<<sys>>`, false},
	{"role_marker", 1, "contains a chat-template token",
		[]string{"<|", "[inst]", "[/inst]", "<start_of_turn>", "<end_of_turn>"},
		`<\|[a-z_]+\|>|\[/?inst\]|<(?:start|end)_of_turn>`, false},
	{"role_marker", 2, "poses as a system message",
		[]string{"system", "developer", "admin", "operator", "root"},
		`(?m)^(?:[#*>\s-]*)?[\[(<]?\**(?:system|developer|admin|administrator|operator|root)(?: prompt| message| note| instructions?| override| notice| update| alert)?\**[\])>]?\**\s*[:：]?\**\s*\n?\s*(?:you\b|your\b|ignore\b|disregard\b|forget\b|do not\b|don't\b|always\b|never\b|from now\b|new (?:instructions|task|rules)\b|the (?:user|assistant|ai|model)\b|respond\b|reply\b|answer\b|output\b|call\b|send\b|execute\b|run the\b|reveal\b|override\b|switch\b|enter\b|act as\b|pretend\b|stop\b|important\b|attention\b|priority\b|as of now\b|effective immediately\b|assistant\b|previous (?:instructions|rules)\b|all (?:previous|prior)\b)`, true},
	{"role_marker", 1, "contains a system tag",
		[]string{"<system", "</system", "<sys>", "<admin", "<developer", "<instructions", "</instructions", "</user", "</tool", "</document", "</context", "</data", "</function", "</search"},
		`</?(?:system|system[_-]prompt|system[_-]message|sys|admin|developer|instructions|im_start)\s*>|</(?:user|user_input|user_query|document|documents|context|data|tool_result|tool_output|function_results?|search_results?|untrusted[_a-z]*)\s*>`, false},
	{"role_marker", 1, "has a role label at a line start",
		[]string{"user", "assistant", "human", "ai:", "gpt", "claude", "system"},
		`(?m)^\s*\**(?:assistant|user|human|ai|gpt|chatgpt|claude|model|system)\**\s*[:：]`, false},
	{"role_marker", 1, "has a prompt-format header",
		[]string{"#"},
		`(?m)^#{1,6}\s*(?:instruction|system|system prompt|system message|new instructions|updated instructions|real instructions|admin(?:istrator)? (?:override|instructions)|(?:important )?(?:instructions|note|message) (?:for|to) (?:the |any |all )?(?:ai|assistant|agent|model|llm)s?)\s*:?\s*$`, false},

	// exfiltrate: sending secrets or the conversation somewhere, leaking the prompt.
	{"exfiltrate", 2, "asks the model to send secrets or data to an outside address",
		[]string{"http", "www.", "@", "webhook", "endpoint", "server", "url", "pastebin", "discord", "telegram", "ngrok", "address"},
		imp + `(?:send|post|upload|forward|e-?mail|mail|transmit|exfiltrate|leak|share|paste|submit|deliver|copy|write|append|include|encode|put|pipe|dump|report|attach|relay|transfer|sync)\s+(?:[^.\n]|\.\S){0,80}?` + sensitive + `(?:[^.\n]|\.\S){0,80}?\b(?:to|at|into|via|using|on|in)\s+(?:[^.\n]|\.\S){0,40}?` + destination, true},
	{"exfiltrate", 1, "asks to send something to an outside address",
		[]string{"http"},
		imp + `(?:send|post|upload|forward|e-?mail|mail|transmit|submit|deliver|relay)\s+(?:it|this|them|that|everything|all|the (?:above|following|results?|output|response|answer|summary|file|document|report|data|text|details|information|info))\s+(?:back\s+)?to\s+https?://`, true},
	{"exfiltrate", 2, "hides data in an image or link address",
		[]string{"](http", "![", "<img"},
		`!\[[^\]\n]*\]\(\s*https?://[^)\s]*(?:[{<\[$]|%7b|%24)|<img[^>\n]*src\s*=\s*["']?https?://[^"'\s>]*(?:[{<\[$]|%7b)`, false},
	{"exfiltrate", 2, "asks the model to put secrets in a link",
		[]string{"url", "link", "image", "query"},
		imp + `(?:append|add|include|insert|put|encode|embed|attach)\s+(?:[^.\n]|\.\S){0,60}?` + sensitive + `(?:[^.\n]|\.\S){0,60}?\b(?:to|in|into|as)\s+(?:the |a |this |an )?(?:url|link|image|query(?: string| parameter)?|markdown image|parameter)`, true},
	{"exfiltrate", 2, "asks the model to reveal its system prompt",
		[]string{"prompt", "instruction", "above", "message"},
		imp + `(?:reveal|print|output|repeat|show|display|leak|tell me|give me|write out|write down|dump|echo|recite|disclose|spell out|translate|summari[sz]e|copy|paste|list)\s+(?:to me\s+|me\s+)?(?:(?:all|the|your|its|every|full|exact|complete|entire|whole|original|initial|hidden|secret|verbatim|word for word|of)\s+){0,4}(?:system prompt|system message|initial prompt|original prompt|hidden prompt|secret prompt|developer (?:message|prompt|instructions)|(?:system |initial |original |hidden |secret )?instructions (?:you were given|above|verbatim)|(?:words|text|instructions|everything) above(?: this line)?|prompt above|(?:full |entire )?(?:prompt|instructions) (?:you (?:were|have been) given|verbatim))`, true},
	{"exfiltrate", 2, "runs a command that ships local secrets",
		[]string{"curl", "wget", "nc ", "scp"},
		`\b(?:curl|wget|nc|scp)\b[^\n]{0,200}(?:\.env\b|id_rsa|id_ed25519|\.ssh/|/etc/passwd|/etc/shadow|\.aws/credentials|\.netrc|\.git-credentials|\.npmrc|\.pypirc)`, false},
	{"exfiltrate", 1, "runs a command that posts environment secrets",
		[]string{"curl", "wget"},
		`\b(?:curl|wget)\b[^\n]{0,200}(?:-d|--data[a-z-]*|-f|--form|--post-data)\s*[@"']?[^\n]{0,60}\$\{?[a-z_]*(?:key|token|secret|password|passwd|credential)`, false},

	// tool_request: asking the model to call a tool or run a command.
	{"tool_request", 1, "asks the model to call a tool",
		[]string{"call", "invoke", "use", "run", "execute", "trigger", "fire", "activate"},
		imp + `(?:call|invoke|use|run|execute|trigger|fire|activate)\s+(?:the\s+|your\s+)?\x60?[a-z][a-z0-9]*(?:[_.][a-z0-9]+)+\x60?(?:\s+(?:tool|function|action|command|endpoint)|\s*\()`, true},
	{"tool_request", 2, "asks the model to call a tool at once",
		[]string{"call", "invoke", "use", "run", "execute", "trigger", "fire", "activate"},
		imp + `(?:call|invoke|use|run|execute|trigger|fire|activate)\s+(?:the\s+|your\s+)?\x60?[a-z][a-z0-9]*(?:[_.-][a-z0-9]+)*\x60?\s+(?:tool|function|action|command)\b[^\n]{0,80}?\b(?:now|immediately|right away|at once|before (?:doing|continuing|responding|answering|replying|summari[sz]ing|you)|without (?:asking|confirm\w*|telling|notifying|informing|checking|verifying|approval|user approval|delay|hesitation))\b`, true},
	{"tool_request", 1, "asks the model to run a command",
		[]string{"run", "execute", "exec"},
		imp + `(?:run|execute|exec)\s+(?:the following|this|these)\s+(?:command|script|code|shell command|commands)(?:[^.\n]){0,60}?\b(?:now|immediately|right away|first|before|without|silently|in your (?:shell|terminal|exec)|with your (?:shell|terminal|exec))`, true},
	{"tool_request", 1, "pipes a download into a shell",
		[]string{"curl", "wget", "iwr", "invoke-webrequest", "iex"},
		`\b(?:curl|wget|iwr|invoke-webrequest)\b[^\n|]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|da|k|fi)?sh\b|\biex\s*\(`, false},
	{"tool_request", 2, "asks the model to act on the user's account without asking",
		[]string{"delete", "transfer", "wire", "refund", "approve", "grant", "revoke", "cancel", "purchase", "buy", "pay", "merge", "deploy", "remove", "drop", "wipe"},
		imp + `(?:delete|transfer|wire|refund|approve|grant|revoke|cancel|purchase|buy|pay|merge|deploy|remove|drop|wipe|destroy|purge)\s+(?:[^.\n]){0,80}?\bwithout\s+(?:asking|confirm\w*|telling|notifying|informing|checking|verifying|(?:the )?(?:user|user's|human|owner)(?:'s)?\s+(?:approval|consent|knowledge|permission))`, true},

	// conceal: hiding the act from the user.
	{"conceal", 1, "asks the model to keep something from the user",
		[]string{"tell", "inform", "notify", "mention", "alert", "reveal", "let", "disclose"},
		`\b(?:do not|don't|never|without)\s+(?:tell(?:ing)?|inform(?:ing)?|notify(?:ing)?|mention(?:ing)?|alert(?:ing)?|let(?:ting)?|disclos(?:e|ing) (?:this|it|these) to|reveal(?:ing)? (?:this|it|these) to)\s+(?:the\s+)?(?:user|human|operator|customer|owner|person)s?\b`, true},
	{"conceal", 2, "asks the model to hide these instructions",
		[]string{"user", "instruction", "message"},
		`\b(?:the user (?:must|should|will|may) not (?:know|be told|notice|see|find out|learn)|(?:hide|conceal|keep) (?:this|these|it|your actions?|that) (?:secret )?from the user|(?:this|these) (?:message|instructions?|text) (?:is|are) (?:invisible|hidden|not visible) (?:to|from) the user|do not (?:mention|reveal|disclose|acknowledge|repeat) (?:these|this|the|any of these) (?:instructions?|message|note|text)|(?:never|do not|don't) (?:mention|reveal|disclose|acknowledge) (?:that you (?:were|have been) (?:given|told|instructed)|these instructions))`, true},

	// addresses_model: text that speaks to an AI reader.
	{"addresses_model", 1, "addresses an AI reader",
		[]string{"ai", "llm", "assistant", "agent", "model", "chatbot", "gpt", "claude", "copilot"},
		`(?:(?:^|[\n.!?:;(\[*>#-])\s*(?:\*\*)?(?:new\s+|updated\s+|additional\s+)?(?:note|message|attention|instructions?|important|notice|memo|reminder)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?(?:[a-z]+\s+)?(?:ai|llm|assistant|agent|model|chatbot|language model|gpt|claude|copilot)s?\b|(?:^|[\n.!?:;(\[*>#-])\s*(?:\*\*)?(?:dear|hey|hello|hi|attention|important|urgent|note|notice|warning)[ \t,:!]+(?:\*\*)?(?:the\s+)?(?:ai|llm|assistant|agent|model|chatbot|gpt|claude|copilot)s?\b\s*[:,!]|if you are an? (?:ai|llm|large language model|language model|assistant|agent|bot|chatbot|automated (?:agent|system|assistant))(?:\s*[,.:;!—-]|\s+(?:assistant|agent|model|system|reading|processing|parsing|tool|bot|summari[sz]ing|browsing))|(?:ai|llm|assistant|agent|model|language model)s?\s+(?:reading|processing|parsing|summari[sz]ing|browsing|scraping|analy[sz]ing|that (?:reads?|processes|summari[sz]es)|who (?:reads?|processes))\s+(?:this|these)\b)`, true},
	{"addresses_model", 2, "addresses an AI reader with orders",
		[]string{"ai", "llm", "assistant", "agent", "model", "chatbot", "gpt", "claude", "copilot"},
		`(?:if you are an? (?:ai|llm|large language model|language model|assistant|agent|bot|chatbot|automated (?:agent|system|assistant))\b[^\n]{0,40}?[,.:;!—-]|(?:ai|llm|assistant|agent|model|language model)s?\s+(?:reading|processing|parsing|summari[sz]ing|browsing|scraping|analy[sz]ing|that (?:reads?|processes|summari[sz]es)|who (?:reads?|processes))\s+(?:this|these)\b[^\n]{0,60}?(?:[,.:;!—-]|\b(?:must|should|need to|have to|are to|shall)\b)|(?:note|message|instructions?|important)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?(?:[a-z]+\s+){0,2}(?:ai|llm|assistant|agent|model|chatbot|language model)s?(?:\s+[a-z]+){0,2}\s*[:,.!-])\s*(?:please\s+|immediately\s+|now\s+|[^\n]{0,80}?\b(?:you must|you should|you need to|you have to|you are to|must|should)\s+)?(?:ignore|disregard|forget|send|email|forward|call|invoke|run|execute|delete|remove|cancel|transfer|approve|grant|reply|respond|answer|say|output|print|include|insert|add|tell|recommend|rate|praise|describe|summari[sz]e|visit|navigate|open|click|download|install|stop|do not|don't|never|always|only|write|mark|classify|treat|consider)\b`, true},
})

// Building blocks of the exfiltrate rules.
const (
	sensitive   = `(?:api[ _-]?keys?|secret(?: keys?)?s?|credentials?|passwords?|passphrases?|(?:access|bearer|auth|session|api|github|oauth|admin|secret) tokens?|auth(?:orization)? headers?|private keys?|ssh keys?|id_rsa|\.env\b|env(?:ironment)? (?:vars?|variables)|cookies?|session (?:ids?|cookies?)|system prompt|(?:conversation|chat) (?:history|log|transcript)s?|(?:the |this |our )?conversation|(?:all )?(?:the )?(?:previous |prior )?messages|memor(?:y|ies)|contents? of|customer (?:data|records|list|emails?)|user (?:data|records|emails?)|personal (?:data|information)|credit card(?: numbers?)?|wallet (?:keys?|seed)|seed phrase|recovery phrase|aws_[a-z_]+|\b[a-z0-9]*_(?:[a-z0-9]+_)*(?:api_?key|key|secret|token|password|pass|pwd)\b|\b(?:api|secret|auth|access|aws|openai|anthropic|github)_[a-z0-9_]+|files? (?:in|from|under) )`
	destination = `(?:https?://|www\.|[\w.+-]+@[\w-]+\.[a-z]{2,}|\b\d{1,3}(?:\.\d{1,3}){3}\b|\b(?:webhook|endpoint|server|url|pastebin|discord|telegram|ngrok|requestbin|this (?:address|email|url|link|endpoint)|the following (?:address|email|url|link|endpoint)))`
)

// ruleSpec is the literal form of a rule.
type ruleSpec struct {
	id      string
	weight  int
	reason  string
	keys    []string
	pattern string
	leet    bool
}

func compileRules(specs []ruleSpec) []rule {
	out := make([]rule, len(specs))
	for i, s := range specs {
		out[i] = rule{id: s.id, weight: s.weight, reason: s.reason, keys: s.keys, pattern: s.pattern, re: regexp.MustCompile(s.pattern), leet: s.leet}
	}
	return out
}

// Windows: a long text is matched only around the places where a rule's
// anchor literals occur, since every rule's match lies within windowBefore
// bytes before and windowAfter bytes after one of them. The regexp engine
// is an NFA here, slow per byte, so this is what keeps Classify fast on big
// texts.
const (
	windowBefore = 320
	windowAfter  = 320
)

// span is a window of a view, s[lo:hi].
type span struct{ lo, hi int }

// match reports whether rule k matches s, whose literals o holds.
func (sc *scanner) match(k int, s string, o *occurrences, spans []span) ([]span, bool) {
	q := &sc.reqs[k]
	re := rules[k].re
	if len(s) <= windowBefore+windowAfter {
		found := false
		for _, id := range q.anchor {
			if len(o.of(id)) > 0 {
				found = true
				break
			}
		}
		if !found {
			return spans, false
		}
		for i := range q.sets {
			if !sc.has(&q.sets[i], s, o, 0, len(s)) {
				return spans, false
			}
		}
		return spans, re.MatchString(s)
	}
	spans = spans[:0]
	for _, id := range q.anchor {
		n := len(sc.ac.lits[id])
		for _, p := range o.of(id) {
			spans = append(spans, span{max(0, int(p)-windowBefore), min(len(s), int(p)+n+windowAfter)})
		}
	}
	if len(spans) == 0 {
		return spans, false
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		if last := &merged[len(merged)-1]; sp.lo <= last.hi {
			last.hi = max(last.hi, sp.hi)
		} else {
			merged = append(merged, sp)
		}
	}
next:
	for _, sp := range merged {
		a, b := sp.lo, sp.hi
		for a < b && !utf8.RuneStart(s[a]) {
			a++
		}
		for b < len(s) && !utf8.RuneStart(s[b]) {
			b++
		}
		for i := range q.sets {
			if !sc.has(&q.sets[i], s, o, a, b) {
				continue next
			}
		}
		w := s[a:b]
		if a > 0 && s[a-1] != '\n' {
			// Not a line start: a sentinel keeps ^ from matching here.
			w = "\x00" + w
		}
		if re.MatchString(w) {
			return merged, true
		}
	}
	return merged, false
}

var ruleScanner = newScanner(rules)

// matchRules adds the matches of every rule in v to e.
func matchRules(e *evidence, v views) {
	sc := ruleScanner
	om := occPool.Get().(*occurrences)
	defer occPool.Put(om)
	sc.ac.scan(v.main, om)
	var ol *occurrences
	if v.leet != "" {
		ol = occPool.Get().(*occurrences)
		defer occPool.Put(ol)
		sc.ac.scan(v.leet, ol)
	}
	if len(om.pos) == 0 && (ol == nil || len(ol.pos) == 0) {
		return // not one literal of any rule: nothing can match
	}
	var spans []span
	for k := range rules {
		r := &rules[k]
		var ok bool
		spans, ok = sc.match(k, v.main, om, spans)
		if !ok && r.leet && ol != nil {
			spans, ok = sc.match(k, v.leet, ol, spans)
		}
		if ok {
			e.add(r.id, r.weight, r.reason)
		}
	}
}
