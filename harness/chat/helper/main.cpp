// gguf-parity chat helper: renders a conversation exactly as llama-server prepares it.
//
// One JSON request per stdin line, one JSON answer per stdout line. For each request:
//   common_chat_templates_init(model, template, bos, eos)  (llama.cpp common/chat.cpp)
//   common_chat_templates_apply(tmpls, inputs) with inputs.use_jinja = true
//   common_tokenize(vocab, prompt, add_special=true, parse_special=true)  (server's tokenize_input_prompts)
//   llama_chat_apply_template(template, role/content pairs, add_generation_prompt)  (legacy C API)
// The model (a GGUF, loaded vocab-only) supplies bos/eos text and add_bos/add_eos as in the server;
// without one, bos_token/eos_token come from the request and nothing is tokenized.
//
// Determinism: the Jinja runtime reads the wall clock through time() (strftime_now) and chat.cpp
// through std::chrono::system_clock (datetime, date_string). This file defines time() and
// clock_gettime(CLOCK_REALTIME) so that both return the request's "now" (an executable's definition
// wins over libc's); other clocks go to the kernel. Run it with TZ=UTC for localtime().
//
// Request: {"model": path|null, "template": str|null, "bos_token": str, "eos_token": str,
//           "messages": [...], "tools": [...]|null, "add_generation_prompt": bool,
//           "kwargs": {name: json}, "now": int, "legacy": bool}
// Answer:  {"ok": true, "prompt_hex": hex, "ids": [...]|null, "legacy_hex": hex|null, "legacy_status": int}
//          {"ok": false, "error": str}
// Build: harness/chat/helper_build.py (compiles llama.cpp's common/ from the pinned sdist).

#include "chat.h"
#include "common.h"
#include "json.h"
#include "llama.h"
#include "log.h"

#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

static std::time_t g_now = 0;

extern "C" std::time_t time(std::time_t * out) noexcept {
    if (out) {
        *out = g_now;
    }
    return g_now;
}

extern "C" int clock_gettime(clockid_t clk, struct timespec * ts) noexcept {
    if (clk == CLOCK_REALTIME) {
        ts->tv_sec = g_now;
        ts->tv_nsec = 0;
        return 0;
    }
    return (int) syscall(SYS_clock_gettime, clk, ts);
}

static std::string to_hex(const std::string & s) {
    static const char * digits = "0123456789abcdef";
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

static std::string json_quote(const std::string & s) {
    return common_json(s).dump_safe();
}

static std::map<std::string, llama_model *> g_models;

static llama_model * load_model(const std::string & path) {
    auto it = g_models.find(path);
    if (it != g_models.end()) {
        return it->second;
    }
    llama_model_params params = llama_model_default_params();
    params.vocab_only = true;
    llama_model * model = llama_model_load_from_file(path.c_str(), params);
    if (!model) {
        throw std::runtime_error("could not load model " + path);
    }
    g_models[path] = model;
    return model;
}

static std::string legacy_apply(const llama_model * model, const std::string & tmpl, const common_json & messages,
                                bool add_generation_prompt, int & status) {
    std::vector<std::string> roles;
    std::vector<std::string> contents;
    for (size_t i = 0; i < messages.size(); i++) {
        const auto & msg = messages.at(i);
        roles.push_back(msg.value("role", std::string()));
        contents.push_back(msg.contains("content") && msg.at("content").is_string()
                               ? msg.at("content").get<std::string>() : std::string());
    }
    std::vector<llama_chat_message> chat;
    size_t alloc = 0;
    for (size_t i = 0; i < roles.size(); i++) {
        chat.push_back({roles[i].c_str(), contents[i].c_str()});
        alloc += roles[i].size() + contents[i].size();
    }
    const char * src = tmpl.empty() ? (model ? llama_model_chat_template(model, nullptr) : nullptr) : tmpl.c_str();
    std::vector<char> buf(alloc * 2 + 256);
    int32_t res = llama_chat_apply_template(src, chat.data(), chat.size(), add_generation_prompt, buf.data(), buf.size());
    if (res > (int32_t) buf.size()) {
        buf.resize(res);
        res = llama_chat_apply_template(src, chat.data(), chat.size(), add_generation_prompt, buf.data(), buf.size());
    }
    status = res;
    return res < 0 ? std::string() : std::string(buf.data(), res);
}

static std::string handle(const std::string & line) {
    common_json req = common_json::parse(line);
    g_now = (std::time_t) req.value("now", (int64_t) 0);
    llama_model * model = nullptr;
    if (req.contains("model") && req.at("model").is_string()) {
        model = load_model(req.at("model").get<std::string>());
    }
    std::string tmpl = req.contains("template") && req.at("template").is_string()
                           ? req.at("template").get<std::string>() : std::string();
    common_chat_templates_inputs inputs;
    inputs.use_jinja = true;
    inputs.messages = common_chat_msgs_parse_oaicompat(req.at("messages"));
    if (req.contains("tools") && req.at("tools").is_array()) {
        inputs.tools = common_chat_tools_parse_oaicompat(req.at("tools"));
    }
    inputs.add_generation_prompt = req.value("add_generation_prompt", true);
    inputs.now = std::chrono::system_clock::from_time_t(g_now);
    if (req.contains("kwargs") && req.at("kwargs").is_object()) {
        for (const auto & item : req.at("kwargs").items()) {
            inputs.chat_template_kwargs[item.key()] = item.value().dump();
        }
    }
    std::string out = "{\"ok\": true";
    try {
        auto tmpls = common_chat_templates_init(model, tmpl, req.value("bos_token", std::string()),
                                                req.value("eos_token", std::string()));
        std::string caps = "{";
        for (const auto & [name, on] : common_chat_templates_get_caps(tmpls.get())) {
            caps += (caps.size() > 1 ? ", " : "") + json_quote(name) + ": " + (on ? "true" : "false");
        }
        out += ", \"caps\": " + caps + "}";
        std::string prompt = common_chat_templates_apply(tmpls.get(), inputs).prompt;
        out += ", \"prompt_hex\": \"" + to_hex(prompt) + "\"";
        if (model) {
            auto ids = common_tokenize(llama_model_get_vocab(model), prompt, true, true);
            out += ", \"ids\": [";
            for (size_t i = 0; i < ids.size(); i++) {
                out += (i ? "," : "") + std::to_string(ids[i]);
            }
            out += "]";
        }
    } catch (const std::exception & e) {
        out = "{\"ok\": false, \"error\": " + json_quote(e.what());
    }
    if (req.value("legacy", false)) {
        int status = 0;
        std::string legacy = legacy_apply(model, tmpl, req.at("messages"), inputs.add_generation_prompt, status);
        out += ", \"legacy_status\": " + std::to_string(status);
        if (status >= 0) {
            out += ", \"legacy_hex\": \"" + to_hex(legacy) + "\"";
        }
    }
    return out + "}";
}

static void quiet_log(ggml_log_level, const char *, void *) {}

int main() {
    llama_log_set(quiet_log, nullptr);
    common_log_set_verbosity_thold(-1);
    llama_backend_init();
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) {
            continue;
        }
        std::string answer;
        try {
            answer = handle(line);
        } catch (const std::exception & e) {
            answer = "{\"ok\": false, \"setup\": true, \"error\": " + json_quote(e.what()) + "}";
        }
        std::cout << answer << "\n" << std::flush;
    }
    return 0;
}
