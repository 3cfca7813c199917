"""Chat templates: a conversation rendered and tokenized as llama-server does it.

llama-server turns an OpenAI-style request into a prompt with
`common_chat_templates_apply(use_jinja=true)` (llama.cpp `common/chat.cpp`) and then
tokenizes the prompt with `add_special=true, parse_special=true`. This module
reproduces that path:

1. the messages are parsed and re-serialised as `common_chat_msgs_parse_oaicompat` and
   `to_json_oaicompat` do (content `null` becomes `""`, tool-call arguments become JSON
   text, empty fields are dropped, keys in llama.cpp's order);
2. chat.cpp's input workarounds, decided by the template's capabilities (`chat_caps`):
   `developer` read as `system`, a system message merged into the next message when the
   template ignores the system role, argument strings parsed into objects when the
   template reads them as objects, content as a string or a list of typed parts; and the
   per-template adjustments of `common_chat_try_specialized_template` we reproduce
   (`_SPECIAL`);
3. the template is rendered by `chat_jinja` with `bos_token`, `eos_token`, `tools`,
   `enable_thinking`, `add_generation_prompt` (defined only when true), `datetime`,
   `date_string` and the caller's variables;
4. a leading `bos_token` is cut from the text when the vocabulary adds a BOS itself (and a
   trailing `eos_token` when it adds an EOS): that is how llama.cpp avoids a double BOS;
5. `encode_chat` tokenizes the text with `add_special=True, parse_special=True`.

Not reproduced: the server's "prefill assistant" rule (a conversation ending with an
assistant message is continued instead of closed; `common_chat_templates_apply` itself
does not do it), continuation, `reasoning_format`, grammars and the parsers' outputs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..vocab import Vocab
from . import jinja as chat_jinja
from .budget import DEFAULT_MEMORY_BUDGET, DEFAULT_SIZE_BUDGET, DEFAULT_TIME_BUDGET, Budget
from .caps import Caps, caps_of
from .errors import ChatBudgetExceeded, ChatTemplateError, TemplateRaised

__all__ = ["ChatBudgetExceeded", "ChatTemplateError", "TemplateRaised", "apply_template",
           "chat_template", "prepare_messages"]

CHATML = ("{%- for message in messages -%}\n"
          "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
          "{%- endfor -%}\n"
          "{%- if add_generation_prompt -%}\n"
          "  {{- '<|im_start|>assistant\\n' -}}\n"
          "{%- endif -%}")


def chat_template(metadata: Mapping[str, Any], name: str | None = None) -> str | None:
    """`llama_model_chat_template(model, name)`: the GGUF's template, or a named variant."""
    key = "tokenizer.chat_template" if not name else f"tokenizer.chat_template.{name}"
    value = metadata.get(key)
    return value if isinstance(value, str) else None


def _source_fixes(src: str) -> str:
    """The two source patches of `common_chat_templates_init` (GPT-OSS and Mistral checks)."""
    if "<|channel|>" in src and "in message.content or" in src:
        src = src.replace('{%- if "<|channel|>analysis<|message|>" in message.content or '
                          '"<|channel|>final<|message|>" in message.content %}', "{%- if false %}")
    if "[TOOL_CALLS]" in src and "if (message['content'] is none or" in src:
        src = src.replace("{%- if (message['content'] is none or message['content'] == '' or "
                          "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                          "message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
                          "{%- if false %}")
    return src


def _dump_compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _parse_message(message: Any, index: int) -> dict[str, Any]:
    """One message as common_chat_msgs_parse_oaicompat + to_json_oaicompat leave it."""
    if not isinstance(message, Mapping) or "role" not in message:
        raise ChatTemplateError(f"message {index}: expected an object with a 'role'")
    if "content" not in message and "tool_calls" not in message:
        raise ChatTemplateError(f"message {index}: expected 'content' or 'tool_calls'")
    content = message.get("content")
    out: dict[str, Any] = {"role": message["role"]}
    if isinstance(content, list):
        parts = [{"type": p["type"], "text": p["text"]} for p in content]
        if any(p["type"] not in ("text", "media_marker") for p in parts):
            raise ChatTemplateError(f"message {index}: unsupported content part type")
        out["content"] = parts if parts else ""
    elif isinstance(content, str) or content is None:
        out["content"] = content or ""
    else:
        raise ChatTemplateError(f"message {index}: content must be a string, a list or null")
    for key, name in (("reasoning_content", "reasoning_content"), ("name", "name"),
                      ("tool_call_id", "tool_call_id")):
        if message.get(key):
            out[name] = message[key]
    calls = []
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        args = fn.get("arguments")
        tc: dict[str, Any] = {"type": "function", "function": {
            "name": fn["name"], "arguments": args if isinstance(args, str) else _dump_compact(args)}}
        if "id" in call:
            tc["id"] = call["id"]
        calls.append(tc)
    if calls:
        out["tool_calls"] = calls
    return out


def _parse_tools(tools: Sequence[Any] | None) -> list[dict[str, Any]] | None:
    """common_chat_tools_parse_oaicompat + common_chat_tools_to_json_oaicompat."""
    if not tools:
        return None
    out = []
    for tool in tools:
        fn = tool["function"]
        out.append({"type": "function", "function": {
            "name": fn["name"], "description": fn.get("description", ""),
            "parameters": fn.get("parameters", {})}})
    return out


def _trim(s: str) -> str:
    return s.strip(" \t\n\v\f\r")


def prepare_messages(messages: Sequence[Any], source: str, caps: Caps) -> list[dict[str, Any]]:
    """The messages as `common_chat_templates_apply_jinja` hands them to the template."""
    msgs = [_parse_message(m, i) for i, m in enumerate(messages)]
    if "You have access to the following functions in JSONSchema format" in source:
        for m in msgs:  # StepFun: trim_all_content
            if isinstance(m["content"], str):
                m["content"] = _trim(m["content"])
            else:
                for p in m["content"]:
                    if p["type"] == "text":
                        p["text"] = _trim(p["text"])
            if "reasoning_content" in m:
                m["reasoning_content"] = _trim(m["reasoning_content"])
                if not m["reasoning_content"]:
                    del m["reasoning_content"]
    only_string = caps.supports_string_content and not caps.supports_typed_content
    only_typed = caps.supports_typed_content and not caps.supports_string_content
    for m in msgs:
        if only_typed and isinstance(m["content"], str):
            m["content"] = [{"type": "text", "text": m["content"]}]
        elif only_string and isinstance(m["content"], list):
            m["content"] = "\n".join(p["text"] for p in m["content"] if p["type"] == "text")
    if "<|channel|>" not in source:
        for m in msgs:
            if m["role"] == "developer":
                m["role"] = "system"
    if not caps.supports_system_role and msgs and msgs[0]["role"] == "system":
        first = msgs.pop(0)
        if msgs:
            if not isinstance(first["content"], str) or not isinstance(msgs[0]["content"], str):
                raise ChatTemplateError("cannot merge a typed-content system message (llama.cpp throws)")
            msgs[0]["content"] = first["content"] + "\n" + msgs[0]["content"]
    if caps.supports_object_arguments:
        for m in msgs:
            for call in m.get("tool_calls", ()):
                args = call["function"]["arguments"]
                try:
                    call["function"]["arguments"] = json.loads(args)
                except ValueError as exc:
                    raise ChatTemplateError(f"Failed to parse tool call arguments as JSON: {exc}") from exc
    return msgs


def handler(src: str) -> str | None:
    """Which specialized handler `common_chat_try_specialized_template` picks (first match wins)."""
    rules = (
        ("ministral3", "[SYSTEM_PROMPT]" in src and "[TOOL_CALLS]" in src and "[ARGS]" in src
         and "[CALL_ID]" not in src),
        ("gpt-oss", "<|channel|>" in src),
        ("muse-glimmer", "<atem:function_calls>" in src and "<|eom|>" in src),
        ("functionary-v3.2", ">>>all" in src and ">>>${recipient}" in src),
        ("kimi-k2", "<|tool_calls_section_begin|>" in src and "<|tool_call_begin|>" in src),
        ("kimi-k3", "<|open|>" in src and "<|close|>" in src and "<|end_of_msg|>" in src),
        ("ling3", "<role>ASSISTANT</role>" in src and "<arg_key>" in src),
        ("cohere2moe", "<|START_TEXT|>" in src and "<|START_ACTION|>" in src),
        ("lfm2", "<|tool_list_start|>" in src and "<|tool_list_end|>" in src),
        ("lfm2.5", "List of tools: [" in src and "<|tool_list_start|>" not in src),
        ("gigachat-v3", "<|role_sep|>" in src and "<|message_sep|>" in src and "<|function_call|>" not in src),
        ("minimax-m3", "]<]minimax[>[" in src and "<tool_call>" in src and "<invoke name=" in src),
        ("deepseek-v3.2", "dsml_token" in src and "DSML" in src and ("function_calls" in src or "tool_calls" in src)),
        ("gemma4", "'<|tool_call>call:'" in src),
    )
    return next((name for name, hit in rules if hit), None)


def _ministral3(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in msgs:
        if m["role"] not in ("system", "assistant"):
            out.append(m)
            continue
        blocks: list[Any] = []
        if isinstance(m.get("reasoning_content"), str):
            blocks.append({"type": "thinking", "thinking": m["reasoning_content"]})
        content = m.get("content")
        if isinstance(content, str):
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            blocks += content
        m = {**m, "content": blocks}
        m.pop("reasoning_content", None)
        out.append(m)
    return out


def _deepseek_v4_sort(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive tool results ordered as the preceding assistant's tool calls (stable)."""
    order: dict[str, int] = {}
    i = 0
    while i < len(msgs):
        m = msgs[i]
        if m["role"] == "assistant" and m.get("tool_calls"):
            order = {c["id"]: k for k, c in enumerate(m["tool_calls"]) if c.get("id")}
            i += 1
            continue
        if m["role"] not in ("user", "tool"):
            i += 1
            continue
        end, tools = i, []
        while end < len(msgs) and msgs[end]["role"] in ("user", "tool"):
            if msgs[end]["role"] == "tool":
                tools.append(end)
            end += 1
        if len(tools) > 1 and order:
            ranked = sorted((msgs[p] for p in tools), key=lambda t: order.get(t.get("tool_call_id", ""), 0))
            for p, t in zip(tools, ranked, strict=True):
                msgs[p] = t
        i = end
    return msgs


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(name)
    return json.loads(text, parse_constant=refuse)


def _gemma4_tool_responses(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`convert_tool_responses_gemma4` (older Gemma 4 templates): assistant(tool calls) + tool results
    (+ a final assistant content) become one assistant message with a `tool_responses` field."""
    out, i = [], 0
    while i < len(msgs):
        m = msgs[i]
        if m["role"] != "assistant" or not m.get("tool_calls"):
            out.append(m)
            i += 1
            continue
        calls = list(m["tool_calls"])
        responses: list[dict[str, Any]] = []
        reasoning = m.get("reasoning_content")
        i += 1
        while i < len(msgs) and msgs[i]["role"] == "tool":
            content = msgs[i].get("content")
            response = content
            if isinstance(content, str):
                try:
                    response = _strict_json(content)
                except ValueError:
                    response = content
            idx = len(responses)
            name = calls[idx]["function"].get("name", "") if idx < len(calls) else ""
            responses.append({"name": name or msgs[i].get("tool_call_id", ""), "response": response})
            i += 1
        final = None
        if i < len(msgs) and msgs[i]["role"] == "assistant" and not msgs[i].get("tool_calls") \
                and msgs[i].get("content"):
            final = msgs[i]["content"]
            i += 1
        merged: dict[str, Any] = {"role": "assistant", "tool_calls": calls}
        if responses:
            merged["tool_responses"] = responses
        if final is not None:
            merged["content"] = final
        if isinstance(reasoning, str):
            merged["reasoning_content"] = reasoning
        out.append(merged)
    return out


def _special(source: str, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Message adjustments of the specialized handlers in common/parsers/ that we reproduce."""
    kind = handler(source)
    if kind in ("gpt-oss", "lfm2", "lfm2.5"):
        for m in msgs:  # reasoning copied to the "thinking" field these templates read
            if isinstance(m.get("reasoning_content"), str):
                m["thinking"] = m["reasoning_content"]
                if kind == "gpt-oss" and m.get("tool_calls"):
                    m.pop("content", None)
    elif kind == "ministral3":
        msgs = _ministral3(msgs)
    elif kind == "deepseek-v3.2" and "function_calls" not in source:
        msgs = _deepseek_v4_sort(msgs)
    elif kind == "gemma4" and "{#- OpenAI Chat Completions:" not in source:
        msgs = _gemma4_tool_responses(msgs)
    return msgs


def apply_template(source: str, messages: Sequence[Any], *, bos_token: str, eos_token: str,
                   add_bos: bool = False, add_eos: bool = False, add_generation_prompt: bool = True,
                   tools: Sequence[Any] | None = None, now: float | None = None,
                   seconds: float = DEFAULT_TIME_BUDGET, size: int = DEFAULT_SIZE_BUDGET,
                   memory: int = DEFAULT_MEMORY_BUDGET, **variables: Any) -> str:
    """The prompt text llama.cpp's Jinja path produces for `messages` (see the module doc).

    `seconds`, `size` and `memory` bound the render (a `Budget`): wall time, the
    characters of any one value and of the output, and the bytes it may grow the process by.
    """
    if not source or source == "chatml":
        source = CHATML
    source = _source_fixes(source)
    now = time.time() if now is None else now
    budget = Budget(seconds, size, memory)
    caps = caps_of(source, budget)
    msgs = _special(source, prepare_messages(messages, source, caps))
    context: dict[str, Any] = {"messages": msgs, "bos_token": bos_token, "eos_token": eos_token,
                               "enable_thinking": True}
    parsed_tools = _parse_tools(tools)
    if parsed_tools is not None:
        context["tools"] = parsed_tools
    local = time.localtime(now)
    context["datetime"] = time.strftime("%b %d %Y", local)
    context["date_string"] = time.strftime("%d %b %Y", local)
    context.update(variables)
    if add_generation_prompt:
        context["add_generation_prompt"] = True
    text = chat_jinja.render(source, context, now=now, budget=budget)
    if add_bos and text.startswith(bos_token):
        text = text[len(bos_token):]
    if add_eos and text.endswith(eos_token):
        text = text[:len(text) - len(eos_token)]
    kind = handler(source)
    if kind == "gpt-oss" and not add_generation_prompt:
        pos = text.rfind("<|return|>")
        if pos >= 0:
            text = text[:pos] + "<|end|>" + text[pos + len("<|return|>"):]
    if kind == "gemma4" and add_generation_prompt and text.endswith("<turn|>\n"):
        text += "<|turn>model\n"
    return text


class Spelling(Protocol):
    """What `special_text` needs of a tokenizer (`tokenizer.Tokenizer` is one): its vocabulary and pieces."""

    vocab: Vocab

    def token_to_piece(self, token: int, *, lstrip: int = 0, special: bool) -> bytes: ...


def special_text(tok: Spelling, role: str) -> str:
    """`common_token_to_piece(vocab, <role> token, special=true)`, '' when the vocabulary has none."""
    token = tok.vocab.special[role]
    if token < 0:
        return ""
    return tok.token_to_piece(token, special=True).decode("utf-8", "surrogateescape")
