// The chat templates wormchat recognises, byte for byte as published (their sources beside each).
// Written by tools/chat_template/make_known_templates.py from
// tests/fixtures/chat_templates/*.jinja: edit those and rerun it. model/chat/chat_template.cpp
// renders each kind.
#include "model/chat/chat_template.h"

namespace wc {

// One literal a template line, as the generator writes them (clang-format leaves them so).
// clang-format off
const std::vector<KnownChatTemplateText>& KnownChatTemplateTexts() {
  static const std::vector<KnownChatTemplateText> texts = {
      {ChatTemplateKind::kChatMl, "plain ChatML, transformers' old default template; teknium/OpenHermes-2.5-Mistral-7B as quoted by llama.cpp",
           "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n"
           "' + message['content'] + '<|im_end|>' + '\n"
           "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
           "' }}{% endif %}"},
      {ChatTemplateKind::kFalcon3, "tiiuae/Falcon3-7B-Instruct and tiiuae/Falcon3-3B-Instruct tokenizer_config.json chat_template (tools branch + plain branch)",
           "{%- if tools %}\n"
           "{{- '<|system|>\\n' }}\n"
           "{%- if messages[0]['role'] == 'system' %}\n"
           "{{- messages[0]['content'] }}\n"
           "{%- set remaining_messages = messages[1:] %}\n"
           "{%- else %}\n"
           "{%- set remaining_messages = messages %}\n"
           "{%- endif %}\n"
           "{{- 'You are a Falcon assistant skilled in function calling. You are helpful, respectful, and concise.\\n\\n# Tools\\n\\nYou have access to the following functions. You MUST use them to answer questions when needed. For each function call, you MUST return a JSON object inside <tool_call></tool_call> tags.\\n\\n<tools>' + tools|tojson(indent=2) + '</tools>\\n\\n# Output Format\\n\\nYour response MUST follow this format when making function calls:\\n<tool_call>\\n[\\n  {\"name\": \"function_name\", \"arguments\": {\"arg1\": \"value1\", \"arg2\": \"value2\"}},\\n  {\"name\": \"another_function\", \"arguments\": {\"arg\": \"value\"}}\\n]\\n</tool_call>\\nIf no function calls are needed, respond normally without the tool_call tags.\\n' }}\n"
           "{%- for message in remaining_messages %}\n"
           "{%- if message['role'] == 'user' %}\n"
           "{{- '<|user|>\\n' + message['content'] + '\\n' }}\n"
           "{%- elif message['role'] == 'assistant' %}\n"
           "{%- if message.content %}\n"
           "{{- '<|assistant|>\\n' + message['content'] }}\n"
           "{%- endif %}\n"
           "{%- if message.tool_calls %}\n"
           "{{- '\\n<tool_call>\\n' }}\n"
           "{{- message.tool_calls|tojson(indent=2) }}\n"
           "{{- '\\n</tool_call>' }}\n"
           "{%- endif %}\n"
           "{{- eos_token + '\\n' }}\n"
           "{%- elif message['role'] == 'tool' %}\n"
           "{{- '<|assistant|>\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>\\n' }}\n"
           "{%- endif %}\n"
           "{%- endfor %}\n"
           "{{- '<|assistant|>\\n' if add_generation_prompt }}\n"
           "{%- else %}\n"
           "{%- for message in messages %}\n"
           "{%- if message['role'] == 'system' %}\n"
           "{{- '<|system|>\\n' + message['content'] + '\\n' }}\n"
           "{%- elif message['role'] == 'user' %}\n"
           "{{- '<|user|>\\n' + message['content'] + '\\n' }}\n"
           "{%- elif message['role'] == 'assistant' %}\n"
           "{%- if not loop.last %}\n"
           "{{- '<|assistant|>\\n' + message['content'] + eos_token + '\\n' }}\n"
           "{%- else %}\n"
           "{{- '<|assistant|>\\n' + message['content'] + eos_token }}\n"
           "{%- endif %}\n"
           "{%- endif %}\n"
           "{%- if loop.last and add_generation_prompt %}\n"
           "{{- '<|assistant|>\\n' }}\n"
           "{%- endif %}\n"
           "{%- endfor %}\n"
           "{%- endif %}"},
      {ChatTemplateKind::kFalconInstruct, "tiiuae/falcon-7b-instruct tokenizer_config.json chat_template (User:/Assistant:, strip, CR LF literal)",
           "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = '' %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 %}{{ system_message.strip() }}{% endif %}{% if message['role'] == 'user' %}{{ '\n"
           "\n"
           "User: ' + message['content'].strip().replace('\r\n"
           "', '\n"
           "').replace('\n"
           "\n"
           "', '\n"
           "') }}{% elif message['role'] == 'assistant' %}{{ '\n"
           "\n"
           "Assistant: ' + message['content'].strip().replace('\r\n"
           "', '\n"
           "').replace('\n"
           "\n"
           "', '\n"
           "') }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '\n"
           "\n"
           "Assistant:' }}{% endif %}"},
      {ChatTemplateKind::kLlama3, "meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json chat_template (Llama 3.0, `| trim`, add_generation_prompt guard)",
           "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n"
           "\n"
           "'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n"
           "\n"
           "' }}{% endif %}"},
      {ChatTemplateKind::kZephyr, "HuggingFaceH4/zephyr-7b-beta tokenizer_config.json chat_template",
           "{% for message in messages %}\n"
           "{% if message['role'] == 'user' %}\n"
           "{{ '<|user|>\n"
           "' + message['content'] + eos_token }}\n"
           "{% elif message['role'] == 'system' %}\n"
           "{{ '<|system|>\n"
           "' + message['content'] + eos_token }}\n"
           "{% elif message['role'] == 'assistant' %}\n"
           "{{ '<|assistant|>\n"
           "'  + message['content'] + eos_token }}\n"
           "{% endif %}\n"
           "{% if loop.last and add_generation_prompt %}\n"
           "{{ '<|assistant|>' }}\n"
           "{% endif %}\n"
           "{% endfor %}"},
  };
  return texts;
}
// clang-format on

}  // namespace wc
