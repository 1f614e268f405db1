// Unit tests of the gemma4 renderers (gemma4, gemma4-small, gemma4-large)
// and parsers (gemma4, gemma4-no-thinking): the cases of Ollama's
// model/renderers/gemma4_reference_test.go (prompts checked there against
// Google's Jinja templates) and model/parsers/gemma4_test.go, plus streams
// split at every byte.
//
// Test JSON is written with single quotes, turned into double quotes by J().
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "renderer/renderer.h"
#include "testutil.h"
#include "renderertest.h"

static json_t *J(const char *text)
{
    char *s = xstrdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t je;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &je);
    if (!v)
        fail_msg("bad test JSON (%s): %s", je.text, s);
    free(s);
    return v;
}

static char *render(const char *name, const char *msgs, const char *tools,
                    const struct renderer_think *think)
{
    json_t *m = J(msgs);
    json_t *t = tools ? J(tools) : NULL;
    struct buf out;
    buf_init(&out, 0);
    struct err e = {0};
    int rc = renderer_render(name, m, t, think, &out, &e);
    if (rc < 0)
        fail_msg("render %s: %s", name, e.msg);
    json_decref(m);
    json_decref(t);
    return buf_take(&out);
}

// want: the calls in J()'s notation, compared as jansson writes both.
static void assert_calls(json_t *calls, const char *want)
{
    char *got = calls_text(calls);
    json_t *w = J(want);
    char *ws = json_dumps(w, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(got, ws);
    free(got);
    free(ws);
    json_decref(w);
}

static const struct renderer_think think_true = {.set = true, .on = true};
static const struct renderer_think think_false = {.set = true, .on = false};
static const struct renderer_think think_high = {.set = true, .on = true, .level = "high"};

#define Q "<|\"|>"

// ---------------------------------------------------------------------------
// Tools of the reference cases and the declarations Gemma's template writes
// for them.

#define BASH_TOOL                                                                                  \
    "{'type':'function','function':{'name':'bash','description':'Run a command','parameters':{"    \
    "'type':'object','required':['command'],'properties':{'command':{'type':'string',"             \
    "'description':'The command'}}}}}"
#define READ_TOOL                                                                                  \
    "{'type':'function','function':{'name':'read','description':'Read a file','parameters':{"      \
    "'type':'object','required':['path'],'properties':{'path':{'type':'string',"                   \
    "'description':'File path'}}}}}"
#define WEATHER_TOOL                                                                               \
    "{'type':'function','function':{'name':'get_weather','description':'Get weather',"             \
    "'parameters':{'type':'object','properties':{'city':{'type':'string','description':'City'}}}}" \
    "}"
#define ADD_TOOL                                                                                   \
    "{'type':'function','function':{'name':'add','description':'Add numbers','parameters':{"       \
    "'type':'object','properties':{'a':{'type':'number'},'b':{'type':'number'}}}}}"
#define FLAG_TOOL                                                                                  \
    "{'type':'function','function':{'name':'set_flag','description':'Set a flag','parameters':{"   \
    "'type':'object','properties':{'enabled':{'type':'boolean','description':'Flag value'}}}}}"
#define MODE_TOOL                                                                                  \
    "{'type':'function','function':{'name':'set_mode','description':'Set mode','parameters':{"     \
    "'type':'object','properties':{'mode':{'type':'string','description':'The mode',"              \
    "'enum':['fast','slow']}}}}}"
#define BASH_SMALL_TOOL                                                                            \
    "{'type':'function','function':{'name':'bash','description':'Run','parameters':{"              \
    "'type':'object','required':['command'],'properties':{'command':{'type':'string',"             \
    "'description':'Cmd'}}}}}"
#define NESTED_TOOL                                                                                \
    "{'type':'function','function':{'name':'create','description':'Create item','parameters':{"    \
    "'type':'object','properties':{'name':{'type':'string','description':'Name'},'config':{"       \
    "'type':'object','description':'Config','properties':{'enabled':{'type':'boolean',"            \
    "'description':'On/off'}}}}}}}"
#define ARRAY_TOOL                                                                                 \
    "{'type':'function','function':{'name':'batch','description':'Run batch','parameters':{"       \
    "'type':'object','properties':{'commands':{'type':'array','description':'Commands',"           \
    "'items':{'type':'string'}}}}}}"
#define UNION_TOOL                                                                                 \
    "{'type':'function','function':{'name':'maybe_name','description':'Test nullable union',"      \
    "'parameters':{'type':'object','properties':{'name':{'type':['string','null'],"                \
    "'description':'Name'}}}}}"
#define ANYOF_TOOL                                                                                 \
    "{'type':'function','function':{'name':'pick_value','description':'Pick a value',"             \
    "'parameters':{'type':'object','properties':{'value':{'anyOf':[{'type':'string'},"             \
    "{'type':'number'}],'description':'Value'}}}}}"
#define CONFIGURE_TOOL                                                                             \
    "{'type':'function','function':{'name':'configure','description':'Configure','parameters':{"   \
    "'type':'object','properties':{'config':{'type':'object','description':'Config'}}}}}"
#define BATCH_ARRAY_TOOL                                                                           \
    "{'type':'function','function':{'name':'batch','description':'Run batch','parameters':{"       \
    "'type':'object','properties':{'ids':{'type':'array','description':'IDs'}}}}}"
#define COUNT_TOOL                                                                                 \
    "{'type':'function','function':{'name':'count','description':'Count items','parameters':{"     \
    "'type':'object','properties':{'n':{'type':'number'}}}}}"
#define ENUM_NODESC_TOOL                                                                           \
    "{'type':'function','function':{'name':'set_level','description':'Set level','parameters':{"   \
    "'type':'object','properties':{'level':{'type':'string','enum':['low','high']}}}}}"
#define NESTED_REQUIRED_TOOL                                                                       \
    "{'type':'function','function':{'name':'create_user','description':'Create user',"             \
    "'parameters':{'type':'object','properties':{'profile':{'type':'object',"                      \
    "'description':'Profile','required':['name'],'properties':{'name':{'type':'string',"           \
    "'description':'Name'},'age':{'type':'number','description':'Age'}}}}}}}"
#define CALC_TOOL                                                                                  \
    "{'type':'function','function':{'name':'calc','description':'Calculate','parameters':{"        \
    "'type':'object','properties':{'value':{'type':'number','description':'Value'}}}}}"
#define RAW_TOOL                                                                                   \
    "{'type':'function','function':{'name':'raw','description':'Raw input','parameters':{"         \
    "'type':'object'}}}"
#define MOVE_TOOL                                                                                  \
    "{'type':'function','function':{'name':'move','description':'Move','parameters':{"             \
    "'type':'object','required':['x','y'],'properties':{'x':{'type':'number','description':'X'},"  \
    "'y':{'type':'number','description':'Y'}}}}}"
#define ARRAY_NOITEMS_TOOL                                                                         \
    "{'type':'function','function':{'name':'tag','description':'Tag items','parameters':{"         \
    "'type':'object','properties':{'tags':{'type':'array','description':'Tags'}}}}}"
#define OBJECT_NODESC_TOOL                                                                         \
    "{'type':'function','function':{'name':'update','description':'Update settings',"              \
    "'parameters':{'type':'object','properties':{'settings':{'type':'object','properties':{"       \
    "'verbose':{'type':'boolean','description':'Verbose mode'}}}}}}}"
#define SEARCH_TOOL                                                                                \
    "{'type':'function','function':{'name':'search','description':'Search','parameters':{"         \
    "'type':'object','properties':{'query':{'type':'string','description':'Search query'},"        \
    "'limit':{'type':'number'},'offset':{'type':'number','description':'Start offset'}}}}}"

#define BASH_DECL                                                                                  \
    "<|tool>declaration:bash{description:" Q "Run a command" Q                                     \
    ",parameters:{properties:{command:{description:" Q "The command" Q ",type:" Q "STRING" Q       \
    "}},required:[" Q "command" Q "],type:" Q "OBJECT" Q "}}<tool|>"
#define READ_DECL                                                                                  \
    "<|tool>declaration:read{description:" Q "Read a file" Q                                       \
    ",parameters:{properties:{path:{description:" Q "File path" Q ",type:" Q "STRING" Q            \
    "}},required:[" Q "path" Q "],type:" Q "OBJECT" Q "}}<tool|>"
#define WEATHER_DECL                                                                               \
    "<|tool>declaration:get_weather{description:" Q "Get weather" Q                                \
    ",parameters:{properties:{city:{description:" Q "City" Q ",type:" Q "STRING" Q "}},type:" Q    \
    "OBJECT" Q "}}<tool|>"
#define ADD_DECL                                                                                   \
    "<|tool>declaration:add{description:" Q "Add numbers" Q ",parameters:{properties:{a:{type:" Q  \
    "NUMBER" Q "},b:{type:" Q "NUMBER" Q "}},type:" Q "OBJECT" Q "}}<tool|>"
#define FLAG_DECL                                                                                  \
    "<|tool>declaration:set_flag{description:" Q "Set a flag" Q                                    \
    ",parameters:{properties:{enabled:{description:" Q "Flag value" Q ",type:" Q "BOOLEAN" Q       \
    "}},type:" Q "OBJECT" Q "}}<tool|>"
#define MODE_DECL                                                                                  \
    "<|tool>declaration:set_mode{description:" Q "Set mode" Q                                      \
    ",parameters:{properties:{mode:{description:" Q "The mode" Q ",enum:[" Q "fast" Q "," Q        \
    "slow" Q "],type:" Q "STRING" Q "}},type:" Q "OBJECT" Q "}}<tool|>"
#define BASH_SMALL_DECL                                                                            \
    "<|tool>declaration:bash{description:" Q "Run" Q ",parameters:{properties:{command:{"          \
    "description:" Q "Cmd" Q ",type:" Q "STRING" Q "}},required:[" Q "command" Q "],type:" Q       \
    "OBJECT" Q "}}<tool|>"
#define NESTED_DECL                                                                                \
    "<|tool>declaration:create{description:" Q "Create item" Q                                     \
    ",parameters:{properties:{config:{description:" Q "Config" Q                                   \
    ",properties:{enabled:{description:" Q "On/off" Q ",type:" Q "BOOLEAN" Q "}},type:" Q          \
    "OBJECT" Q "},name:{description:" Q "Name" Q ",type:" Q "STRING" Q "}},type:" Q "OBJECT" Q     \
    "}}<tool|>"
#define ARRAY_DECL                                                                                 \
    "<|tool>declaration:batch{description:" Q "Run batch" Q                                        \
    ",parameters:{properties:{commands:{description:" Q "Commands" Q ",items:{type:" Q "STRING" Q  \
    "},type:" Q "ARRAY" Q "}},type:" Q "OBJECT" Q "}}<tool|>"
#define CONFIGURE_DECL                                                                             \
    "<|tool>declaration:configure{description:" Q "Configure" Q                                    \
    ",parameters:{properties:{config:{description:" Q "Config" Q ",properties:{},type:" Q          \
    "OBJECT" Q "}},type:" Q "OBJECT" Q "}}<tool|>"
#define BATCH_ARRAY_DECL                                                                           \
    "<|tool>declaration:batch{description:" Q "Run batch" Q                                        \
    ",parameters:{properties:{ids:{description:" Q "IDs" Q ",type:" Q "ARRAY" Q "}},type:" Q       \
    "OBJECT" Q "}}<tool|>"
#define COUNT_DECL                                                                                 \
    "<|tool>declaration:count{description:" Q "Count items" Q                                      \
    ",parameters:{properties:{n:{type:" Q "NUMBER" Q "}},type:" Q "OBJECT" Q "}}<tool|>"
#define ENUM_NODESC_DECL                                                                           \
    "<|tool>declaration:set_level{description:" Q "Set level" Q                                    \
    ",parameters:{properties:{level:{enum:[" Q "low" Q "," Q "high" Q "],type:" Q "STRING" Q       \
    "}},type:" Q "OBJECT" Q "}}<tool|>"
#define SEARCH_DECL                                                                                \
    "<|tool>declaration:search{description:" Q "Search" Q                                          \
    ",parameters:{properties:{limit:{type:" Q "NUMBER" Q "},offset:{description:" Q                \
    "Start offset" Q ",type:" Q "NUMBER" Q "},query:{description:" Q "Search query" Q ",type:" Q   \
    "STRING" Q "}},type:" Q "OBJECT" Q "}}<tool|>"
#define ARRAY_NOITEMS_DECL                                                                         \
    "<|tool>declaration:tag{description:" Q "Tag items" Q                                          \
    ",parameters:{properties:{tags:{description:" Q "Tags" Q ",type:" Q "ARRAY" Q "}},type:" Q     \
    "OBJECT" Q "}}<tool|>"
#define OBJECT_NODESC_DECL                                                                         \
    "<|tool>declaration:update{description:" Q "Update settings" Q                                 \
    ",parameters:{properties:{settings:{properties:{verbose:{description:" Q "Verbose mode" Q      \
    ",type:" Q "BOOLEAN" Q "}},type:" Q "OBJECT" Q "}},type:" Q "OBJECT" Q "}}<tool|>"
#define NESTED_REQUIRED_DECL                                                                       \
    "<|tool>declaration:create_user{description:" Q "Create user" Q                                \
    ",parameters:{properties:{profile:{description:" Q "Profile" Q                                 \
    ",properties:{age:{description:" Q "Age" Q ",type:" Q "NUMBER" Q "},name:{description:" Q      \
    "Name" Q ",type:" Q "STRING" Q "}},required:[" Q "name" Q "],type:" Q "OBJECT" Q "}},type:" Q  \
    "OBJECT" Q "}}<tool|>"
#define CALC_DECL                                                                                  \
    "<|tool>declaration:calc{description:" Q "Calculate" Q                                         \
    ",parameters:{properties:{value:{description:" Q "Value" Q ",type:" Q "NUMBER" Q "}},type:" Q  \
    "OBJECT" Q "}}<tool|>"
#define RAW_DECL                                                                                   \
    "<|tool>declaration:raw{description:" Q "Raw input" Q ",parameters:{type:" Q "OBJECT" Q        \
    "}}<tool|>"
#define MOVE_DECL                                                                                  \
    "<|tool>declaration:move{description:" Q "Move" Q ",parameters:{properties:{x:{description:" Q \
    "X" Q ",type:" Q "NUMBER" Q "},y:{description:" Q "Y" Q ",type:" Q "NUMBER" Q                  \
    "}},required:[" Q "x" Q "," Q "y" Q "],type:" Q "OBJECT" Q "}}<tool|>"

// One assistant call of bash with a command, and its result.
#define BASH_CALL(cmd)                                                                             \
    "{'role':'assistant','tool_calls':[{'function':{'name':'bash','arguments':{'command':'" cmd    \
    "'}}}]}"
#define TOOL_RESULT(name, text) "{'role':'tool','tool_name':'" name "','content':'" text "'}"
#define BASH_CALL_TEXT(cmd)     "<|tool_call>call:bash{command:" Q cmd Q "}<tool_call|>"
#define RESPONSE(name, text)    "<|tool_response>response:" name "{value:" Q text Q "}<tool_response|>"

enum { THINK_UNSET, THINK_TRUE, THINK_FALSE, THINK_HIGH };

struct render_case {
    const char *name;
    const char *msgs, *tools;
    int think;
    const char *want;
};

// TestGemma4RendererMatchesReference.
static const struct render_case reference_cases[] = {
    // Header block paths.
    {"user_only", "[{'role':'user','content':'Hello'}]", NULL, THINK_UNSET,
     "<bos><|turn>user\nHello<turn|>\n<|turn>model\n"},
    {"system_user",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'Hi'}]", NULL,
     THINK_UNSET,
     "<bos><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"developer_user",
     "[{'role':'developer','content':'You are helpful.'},{'role':'user','content':'Hi'}]", NULL,
     THINK_UNSET,
     "<bos><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"tools_no_system", "[{'role':'user','content':'Hi'}]", "[" BASH_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_DECL "<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"system_tools",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'Hi'}]",
     "[" BASH_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\nYou are helpful." BASH_DECL
     "<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"thinking_no_system", "[{'role':'user','content':'Hi'}]", NULL, THINK_TRUE,
     "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"thinking_system",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'Hi'}]", NULL,
     THINK_TRUE,
     "<bos><|turn>system\n<|think|>\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n"
     "<|turn>model\n"},
    {"thinking_tools", "[{'role':'user','content':'Hi'}]", "[" BASH_TOOL "]", THINK_TRUE,
     "<bos><|turn>system\n<|think|>\n" BASH_DECL "<turn|>\n<|turn>user\nHi<turn|>\n"
     "<|turn>model\n"},
    {"thinking_system_tools",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'Hi'}]",
     "[" BASH_TOOL "]", THINK_TRUE,
     "<bos><|turn>system\n<|think|>\nYou are helpful." BASH_DECL
     "<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"developer_tools_thinking_trimmed",
     "[{'role':'developer','content':'  Prefer terse answers.\\nUse tools when needed.  '},"
     "{'role':'user','content':'Hi'}]",
     "[" BASH_TOOL "," READ_TOOL "]", THINK_TRUE,
     "<bos><|turn>system\n<|think|>\nPrefer terse answers.\nUse tools when needed." BASH_DECL
         READ_DECL "<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"thinking_explicitly_disabled", "[{'role':'user','content':'Hi'}]", NULL, THINK_FALSE,
     "<bos><|turn>user\nHi<turn|>\n<|turn>model\n"},

    // Message loop paths.
    {"multi_turn",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'Hi'},"
     "{'role':'assistant','content':'Hello!'},{'role':'user','content':'More'}]",
     NULL, THINK_UNSET,
     "<bos><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n"
     "<|turn>model\nHello!<turn|>\n<|turn>user\nMore<turn|>\n<|turn>model\n"},
    {"tool_call_response",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'List files'},"
     "" BASH_CALL("ls") "," TOOL_RESULT("bash", "file1.txt\\nfile2.txt") "]",
     "[" BASH_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\nYou are helpful." BASH_DECL "<turn|>\n<|turn>user\nList files<turn|>\n"
     "<|turn>model\n" BASH_CALL_TEXT("ls") RESPONSE("bash", "file1.txt\nfile2.txt")},
    {"tool_call_pending_response",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'List files'},"
     "{'role':'assistant','content':'Let me check.','tool_calls':[{'function':{'name':'bash',"
     "'arguments':{'command':'ls'}}}]}]",
     "[" BASH_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\nYou are helpful." BASH_DECL "<turn|>\n<|turn>user\nList files<turn|>\n"
     "<|turn>model\n" BASH_CALL_TEXT("ls") "Let me check.<|tool_response>"},
    {"full_round_trip",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'List files'},"
     "" BASH_CALL("ls") "," TOOL_RESULT(
         "bash", "file1.txt\\nfile2.txt") ","
                                          "{'role':'assistant','content':'Here are the files.'},"
                                          "{'role':'user','content':'Read file1.txt'}]",
     "[" BASH_TOOL "," READ_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\nYou are helpful." BASH_DECL READ_DECL
     "<turn|>\n<|turn>user\nList files<turn|>\n<|turn>model\n" BASH_CALL_TEXT("ls")
         RESPONSE("bash", "file1.txt\nfile2.txt") "Here are the files.<turn|>\n"
                                                  "<|turn>user\nRead file1.txt<turn|>\n"
                                                  "<|turn>model\n"},
    {"multiple_tool_calls",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'List and read'},"
     "{'role':'assistant','tool_calls':[{'function':{'name':'bash','arguments':{'command':'ls'}}},"
     "{'function':{'name':'read','arguments':{'path':'go.mod'}}}]},"
     "" TOOL_RESULT("bash", "file1.txt\\nfile2.txt") "," TOOL_RESULT("read",
                                                                     "module example.com/foo") "]",
     "[" BASH_TOOL "," READ_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\nYou are helpful." BASH_DECL READ_DECL
     "<turn|>\n<|turn>user\nList and read<turn|>\n<|turn>model\n" BASH_CALL_TEXT(
         "ls") "<|tool_call>call:read{path:" Q "go.mod" Q
               "}<tool_call|>" RESPONSE("bash", "file1.txt\n"
                                                "file2.txt")
                   RESPONSE("read", "module example.com/foo")},
    {"multiple_tool_calls_with_thinking_ids_and_continuation",
     "[{'role':'system','content':'You are a coding assistant.'},"
     "{'role':'user','content':'List files, then read config.'},"
     "{'role':'assistant','thinking':'Need the directory listing before reading the config.',"
     "'tool_calls':[{'id':'call_bash','function':{'name':'bash','arguments':{'command':'ls -la'}}},"
     "{'id':'call_read','function':{'name':'read','arguments':{'path':'config.json'}}}]},"
     "{'role':'tool','tool_call_id':'call_read','content':'{\\'debug\\': true}'},"
     "{'role':'tool','tool_call_id':'call_bash','content':'config.json\\nmain.go'},"
     "{'role':'assistant','content':'Config loaded.'}]",
     "[" BASH_TOOL "," READ_TOOL "]", THINK_TRUE,
     "<bos><|turn>system\n<|think|>\nYou are a coding assistant." BASH_DECL READ_DECL
     "<turn|>\n<|turn>user\nList files, then read config.<turn|>\n<|turn>model\n"
     "<|channel>thought\nNeed the directory listing before reading the "
     "config.\n<channel|>" BASH_CALL_TEXT(
         "ls -la") "<|tool_call>call:read{path:" Q "config.json" Q
                   "}<tool_call|>" RESPONSE("read", "{\"debug\": true}")
                       RESPONSE("bash", "config.json\nmain.go") "Config loaded.<turn|>\n"
                                                                "<|turn>model\n"},
    {"strip_thinking_history",
     "[{'role':'user','content':'What is 2+2?'},"
     "{'role':'assistant','content':'<|channel>thought\\nThinking...<channel|>4'},"
     "{'role':'user','content':'And 3+3?'}]",
     NULL, THINK_UNSET,
     "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n4<turn|>\n<|turn>user\nAnd 3+3?"
     "<turn|>\n<|turn>model\n"},
    {"assistant_content_with_tool_call",
     "[{'role':'user','content':'Weather?'},{'role':'assistant','content':'Let me check.',"
     "'tool_calls':[{'function':{'name':'get_weather','arguments':{'city':'Paris'}}}]},"
     "" TOOL_RESULT("get_weather", "Sunny") "]",
     "[" WEATHER_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" WEATHER_DECL "<turn|>\n<|turn>user\nWeather?<turn|>\n<|turn>model\n"
     "<|tool_call>call:get_weather{city:" Q "Paris" Q
     "}<tool_call|>" RESPONSE("get_weather", "Sunny") "Let me check.<turn|>\n"},
    {"numeric_arguments",
     "[{'role':'user','content':'Add'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'add','arguments':{'a':1,'b':2}}}]},{'role':'tool','tool_name':'add',"
     "'content':'{\\'result\\': 3}'}]",
     "[" ADD_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" ADD_DECL "<turn|>\n<|turn>user\nAdd<turn|>\n<|turn>model\n"
     "<|tool_call>call:add{a:1,b:2}<tool_call|>" RESPONSE("add", "{\"result\": 3}")},
    {"boolean_argument",
     "[{'role':'user','content':'Set flag'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'set_flag','arguments':{'enabled':true}}}]}," TOOL_RESULT("set_flag", "done") "]",
     "[" FLAG_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" FLAG_DECL "<turn|>\n<|turn>user\nSet flag<turn|>\n<|turn>model\n"
     "<|tool_call>call:set_flag{enabled:true}<tool_call|>" RESPONSE("set_flag", "done")},
    {"tool_with_enum", "[{'role':'user','content':'Test'}]", "[" MODE_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" MODE_DECL "<turn|>\n<|turn>user\nTest<turn|>\n<|turn>model\n"},
    {"unicode_content", "[{'role':'user','content':'こんにちは'}]", NULL, THINK_UNSET,
     "<bos><|turn>user\nこんにちは<turn|>\n<|turn>model\n"},
    {"newlines_in_content", "[{'role':'user','content':'Line 1\\nLine 2\\nLine 3'}]", NULL,
     THINK_UNSET, "<bos><|turn>user\nLine 1\nLine 2\nLine 3<turn|>\n<|turn>model\n"},
    {"json_tool_response_then_user",
     "[{'role':'user','content':'Weather?'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'get_weather','arguments':{'city':'Tokyo'}}}]},{'role':'tool',"
     "'tool_name':'get_weather','content':'{\\'temperature\\': 15, \\'weather\\': \\'sunny\\'}'},"
     "{'role':'user','content':'Thanks!'}]",
     "[" WEATHER_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" WEATHER_DECL "<turn|>\n<|turn>user\nWeather?<turn|>\n<|turn>model\n"
     "<|tool_call>call:get_weather{city:" Q "Tokyo" Q "}<tool_call|>" RESPONSE(
         "get_weather", "{\"temperature\": 15, \"weather\": \"sunny\"}") "<turn|>\n"
                                                                         "<|turn>user\nThanks!"
                                                                         "<turn|>\n"
                                                                         "<|turn>model\n"},
    {"adjacent_assistants_continue_same_model_turn",
     "[{'role':'user','content':'Start'},{'role':'assistant','content':'One.'},"
     "{'role':'assistant','content':'Two.'},{'role':'user','content':'More'}]",
     NULL, THINK_UNSET,
     "<bos><|turn>user\nStart<turn|>\n<|turn>model\nOne.Two.<turn|>\n<|turn>user\nMore<turn|>\n"
     "<|turn>model\n"},

    // Ordering and white space.
    {"sorted_args",
     "[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'bash','arguments':{'zzz':'last','aaa':'first','mmm':'middle'}}}]},"
     "" TOOL_RESULT("bash", "ok") "]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "<|tool_call>call:bash{aaa:" Q "first" Q ",mmm:" Q "middle" Q ",zzz:" Q "last" Q
     "}<tool_call|>" RESPONSE("bash", "ok")},
    {"user_content_trimmed", "[{'role':'user','content':'  hello  '}]", NULL, THINK_UNSET,
     "<bos><|turn>user\nhello<turn|>\n<|turn>model\n"},
    {"empty_tool_args",
     "[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'bash','arguments':{}}}]}," TOOL_RESULT("bash", "ok") "]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "<|tool_call>call:bash{}<tool_call|>" RESPONSE("bash", "ok")},
    {"nested_object_tool", "[{'role':'user','content':'Create'}]", "[" NESTED_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" NESTED_DECL "<turn|>\n<|turn>user\nCreate<turn|>\n<|turn>model\n"},
    {"array_tool", "[{'role':'user','content':'Batch'}]", "[" ARRAY_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" ARRAY_DECL "<turn|>\n<|turn>user\nBatch<turn|>\n<|turn>model\n"},
    {"typed_property_union_type", "[{'role':'user','content':'Hi'}]", "[" UNION_TOOL "]",
     THINK_UNSET,
     "<bos><|turn>system\n<|tool>declaration:maybe_name{description:" Q "Test nullable union" Q
     ",parameters:{properties:{name:{description:" Q "Name" Q ",type:" Q "['STRING', 'NULL']" Q
     "}},type:" Q "OBJECT" Q "}}<tool|><turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"assistant_whitespace_trimmed",
     "[{'role':'user','content':'Hi'},{'role':'assistant','content':'  spaced  '},"
     "{'role':'user','content':'More'}]",
     NULL, THINK_UNSET,
     "<bos><|turn>user\nHi<turn|>\n<|turn>model\nspaced<turn|>\n<|turn>user\nMore<turn|>\n"
     "<|turn>model\n"},
    {"three_tool_responses",
     "[{'role':'user','content':'Do three things'},{'role':'assistant','tool_calls':["
     "{'function':{'name':'bash','arguments':{'command':'a'}}},"
     "{'function':{'name':'bash','arguments':{'command':'b'}}},"
     "{'function':{'name':'bash','arguments':{'command':'c'}}}]},"
     "" TOOL_RESULT("bash", "result-a") "," TOOL_RESULT("bash", "result-b") "," TOOL_RESULT(
         "bash", "result-c") "]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL
     "<turn|>\n<|turn>user\nDo three things<turn|>\n<|turn>model\n" BASH_CALL_TEXT("a")
         BASH_CALL_TEXT("b") BASH_CALL_TEXT("c") RESPONSE("bash", "result-a")
             RESPONSE("bash", "result-b") RESPONSE("bash", "result-c")},
    {"tool_calls_no_content",
     "[{'role':'user','content':'Go'}," BASH_CALL("ls") "," TOOL_RESULT("bash", "files") "]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "" BASH_CALL_TEXT("ls") RESPONSE("bash", "files")},

    // Coverage gaps.
    {"multiple_thinking_blocks",
     "[{'role':'user','content':'Hi'},{'role':'assistant','content':"
     "'<|channel>Think1<channel|>Middle<|channel>Think2<channel|>Done'},"
     "{'role':'user','content':'More'}]",
     NULL, THINK_UNSET,
     "<bos><|turn>user\nHi<turn|>\n<|turn>model\nMiddleDone<turn|>\n<|turn>user\nMore<turn|>\n"
     "<|turn>model\n"},
    {"property_no_description", "[{'role':'user','content':'Count'}]", "[" COUNT_TOOL "]",
     THINK_UNSET,
     "<bos><|turn>system\n" COUNT_DECL "<turn|>\n<|turn>user\nCount<turn|>\n<|turn>model\n"},
    {"system_message_trimmed",
     "[{'role':'system','content':'  You are helpful.  '},{'role':'user','content':'Hi'}]", NULL,
     THINK_UNSET,
     "<bos><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"nested_map_args",
     "[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'configure','arguments':{'config':{'db':{'port':5432,'host':'localhost'}}}}}]},"
     "" TOOL_RESULT("configure", "ok") "]",
     "[" CONFIGURE_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" CONFIGURE_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "<|tool_call>call:configure{config:{db:{host:" Q "localhost" Q
     ",port:5432}}}<tool_call|>" RESPONSE("configure", "ok")},
    {"array_in_args",
     "[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'batch','arguments':{'ids':[1,2,3]}}}]}," TOOL_RESULT("batch", "done") "]",
     "[" BATCH_ARRAY_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BATCH_ARRAY_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "<|tool_call>call:batch{ids:[1,2,3]}<tool_call|>" RESPONSE("batch", "done")},
    {"mixed_array_args",
     "[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'batch','arguments':{'ids':['a',1,true]}}}]}," TOOL_RESULT("batch", "done") "]",
     "[" BATCH_ARRAY_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BATCH_ARRAY_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "<|tool_call>call:batch{ids:[" Q "a" Q ",1,true]}<tool_call|>" RESPONSE("batch", "done")},
    {"enum_no_description", "[{'role':'user','content':'Set'}]", "[" ENUM_NODESC_TOOL "]",
     THINK_UNSET,
     "<bos><|turn>system\n" ENUM_NODESC_DECL "<turn|>\n<|turn>user\nSet<turn|>\n<|turn>model\n"},
    {"system_whitespace_only", "[{'role':'system','content':'   '},{'role':'user','content':'Hi'}]",
     NULL, THINK_UNSET, "<bos><|turn>system\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"empty_assistant_content",
     "[{'role':'user','content':'Hi'},{'role':'assistant','content':''},"
     "{'role':'user','content':'More'}]",
     NULL, THINK_UNSET,
     "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<turn|>\n<|turn>user\nMore<turn|>\n"
     "<|turn>model\n"},
    {"map_arg_string_keys",
     "[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'configure','arguments':{'config':{'key':'value'}}}}]},"
     "" TOOL_RESULT("configure", "ok") "]",
     "[" CONFIGURE_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" CONFIGURE_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "<|tool_call>call:configure{config:{key:" Q "value" Q
     "}}<tool_call|>" RESPONSE("configure", "ok")},
    {"mixed_desc_no_desc", "[{'role':'user','content':'Search'}]", "[" SEARCH_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" SEARCH_DECL "<turn|>\n<|turn>user\nSearch<turn|>\n<|turn>model\n"},

    // Tool results are written as they are (not trimmed).
    {"tool_content_trimmed",
     "[{'role':'user','content':'Go'}," BASH_CALL("ls") "," TOOL_RESULT("bash", "  result  ") "]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "" BASH_CALL_TEXT("ls") RESPONSE("bash", "  result  ")},
    {"empty_system_message", "[{'role':'system','content':''},{'role':'user','content':'Hi'}]",
     NULL, THINK_UNSET, "<bos><|turn>system\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"},
    {"nested_object_with_required", "[{'role':'user','content':'Create'}]",
     "[" NESTED_REQUIRED_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" NESTED_REQUIRED_DECL
     "<turn|>\n<|turn>user\nCreate<turn|>\n<|turn>model\n"},
    {"float_argument",
     "[{'role':'user','content':'Calc'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'calc','arguments':{'value':3.14}}}]}," TOOL_RESULT("calc", "ok") "]",
     "[" CALC_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" CALC_DECL "<turn|>\n<|turn>user\nCalc<turn|>\n<|turn>model\n"
     "<|tool_call>call:calc{value:3.14}<tool_call|>" RESPONSE("calc", "ok")},
    {"thinking_in_last_assistant",
     "[{'role':'user','content':'Hi'},"
     "{'role':'assistant','content':'<|channel>thinking<channel|>Result'}]",
     NULL, THINK_UNSET, "<bos><|turn>user\nHi<turn|>\n<|turn>model\nResult<turn|>\n<|turn>model\n"},
    {"tool_content_multiline_whitespace",
     "[{'role':'user','content':'Go'}," BASH_CALL("ls") "," TOOL_RESULT(
         "bash", "\\n  file1\\n  file2\\n") "]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "" BASH_CALL_TEXT("ls") RESPONSE("bash", "\n  file1\n  file2\n")},
    {"tool_params_type_only", "[{'role':'user','content':'Raw'}]", "[" RAW_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" RAW_DECL "<turn|>\n<|turn>user\nRaw<turn|>\n<|turn>model\n"},
    {"multiple_required", "[{'role':'user','content':'Move'}]", "[" MOVE_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" MOVE_DECL "<turn|>\n<|turn>user\nMove<turn|>\n<|turn>model\n"},
    {"assistant_only_thinking",
     "[{'role':'user','content':'Hi'},"
     "{'role':'assistant','content':'<|channel>just thinking<channel|>'},"
     "{'role':'user','content':'More'}]",
     NULL, THINK_UNSET,
     "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<turn|>\n<|turn>user\nMore<turn|>\n"
     "<|turn>model\n"},

    // Agentic conversations.
    {"thinking_with_tool_calls",
     "[{'role':'system','content':'You are helpful.'},{'role':'user','content':'List files'},"
     "{'role':'assistant','content':'<|channel>I should use bash<channel|>','tool_calls':["
     "{'function':{'name':'bash','arguments':{'command':'ls'}}}]},"
     "" TOOL_RESULT("bash", "file1.txt") ",{'role':'assistant','content':'Here are the files.'},"
                                         "{'role':'user','content':'Thanks'}]",
     "[" BASH_SMALL_TOOL "]", THINK_TRUE,
     "<bos><|turn>system\n<|think|>\nYou are helpful." BASH_SMALL_DECL
     "<turn|>\n<|turn>user\nList files<turn|>\n<|turn>model\n" BASH_CALL_TEXT("ls")
         RESPONSE("bash", "file1.txt") "Here are the files.<turn|>\n<|turn>user\nThanks<turn|>\n"
                                       "<|turn>model\n"},
    {"array_without_items", "[{'role':'user','content':'Tag'}]", "[" ARRAY_NOITEMS_TOOL "]",
     THINK_UNSET,
     "<bos><|turn>system\n" ARRAY_NOITEMS_DECL "<turn|>\n<|turn>user\nTag<turn|>\n<|turn>model\n"},
    {"object_no_desc_with_properties", "[{'role':'user','content':'Update'}]",
     "[" OBJECT_NODESC_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" OBJECT_NODESC_DECL
     "<turn|>\n<|turn>user\nUpdate<turn|>\n<|turn>model\n"},
    {"chained_tool_calls",
     "[{'role':'user','content':'Set up the project'}," BASH_CALL("mkdir src") "," TOOL_RESULT(
         "bash", "") "," BASH_CALL("touch src/main.go") "," TOOL_RESULT("bash", "") ","
                                                                                    "{'role':"
                                                                                    "'assistant',"
                                                                                    "'content':'"
                                                                                    "Done.'},"
                                                                                    "{'role':'"
                                                                                    "user','"
                                                                                    "content':'"
                                                                                    "Thanks'}]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL
     "<turn|>\n<|turn>user\nSet up the project<turn|>\n<|turn>model\n" BASH_CALL_TEXT("mkdir src")
         RESPONSE("bash", "") BASH_CALL_TEXT("touch src/main.go")
             RESPONSE("bash", "") "Done.<turn|>\n<|turn>user\nThanks<turn|>\n<|turn>model\n"},
    {"tool_call_thinking_with_remaining_content",
     "[{'role':'user','content':'List files'},{'role':'assistant','content':"
     "'<|channel>I need to check the directory<channel|>Let me list the files.','tool_calls':["
     "{'function':{'name':'bash','arguments':{'command':'ls'}}}]},"
     "" TOOL_RESULT("bash", "main.go\\ngo.mod") ",{'role':'user','content':'OK'}]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL
     "<turn|>\n<|turn>user\nList files<turn|>\n<|turn>model\n" BASH_CALL_TEXT("ls")
         RESPONSE("bash", "main.go\ngo.mod") "Let me list the files.<turn|>\n<|turn>user\nOK"
                                             "<turn|>\n<|turn>model\n"},
    {"argument_with_newlines",
     "[{'role':'user','content':'Run it'}," BASH_CALL("echo hello\\necho world") "," TOOL_RESULT(
         "bash", "hello\\nworld") "]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL
     "<turn|>\n<|turn>user\nRun it<turn|>\n<|turn>model\n" BASH_CALL_TEXT("echo hello\necho world")
         RESPONSE("bash", "hello\nworld")},
    {"empty_string_argument",
     "[{'role':'user','content':'Go'}," BASH_CALL("") "," TOOL_RESULT("bash", "error") "]",
     "[" BASH_SMALL_TOOL "]", THINK_UNSET,
     "<bos><|turn>system\n" BASH_SMALL_DECL "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n"
     "" BASH_CALL_TEXT("") RESPONSE("bash", "error")},
    {"null_tool_arguments",
     "[{'role':'user','content':'Set optional'},{'role':'assistant','tool_calls':[{'function':{"
     "'name':'set_optional','arguments':{'nested':{'value':null},'value':null}}}]}]",
     NULL, THINK_UNSET,
     "<bos><|turn>user\nSet optional<turn|>\n<|turn>model\n"
     "<|tool_call>call:set_optional{nested:{value:null},value:null}<tool_call|><|tool_response>"},
    {"historical_tool_call_thinking_omitted_before_later_user",
     "[{'role':'user','content':'List files'},{'role':'assistant',"
     "'thinking':'Need the file list before answering.','tool_calls':[{'function':{"
     "'name':'bash','arguments':{'command':'ls'}}}]}," TOOL_RESULT("bash", "file1.txt") ","
                                                                                        "{'role':"
                                                                                        "'user','"
                                                                                        "content'"
                                                                                        ":'Now "
                                                                                        "answer'}"
                                                                                        "]",
     "[" BASH_SMALL_TOOL "]", THINK_TRUE,
     "<bos><|turn>system\n<|think|>\n" BASH_SMALL_DECL
     "<turn|>\n<|turn>user\nList files<turn|>\n<|turn>model\n" BASH_CALL_TEXT("ls")
         RESPONSE("bash", "file1.txt") "<turn|>\n<|turn>user\nNow answer<turn|>\n<|turn>model\n"},
    {"terminal_tool_response_adds_thinking_cue_when_thinking_enabled",
     "[{'role':'user','content':'List files'}," BASH_CALL("ls") "," TOOL_RESULT("bash",
                                                                                "file1.txt") "]",
     "[" BASH_SMALL_TOOL "]", THINK_TRUE,
     "<bos><|turn>system\n<|think|>\n" BASH_SMALL_DECL
     "<turn|>\n<|turn>user\nList files<turn|>\n<|turn>model\n" BASH_CALL_TEXT("ls")
         RESPONSE("bash", "file1.txt") "<|channel>thought\n"},
};

static const struct renderer_think *think_of(int t)
{
    switch (t) {
    case THINK_TRUE:
        return &think_true;
    case THINK_FALSE:
        return &think_false;
    case THINK_HIGH:
        return &think_high;
    default:
        return NULL;
    }
}

static void run_cases(const char *renderer, const struct render_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct render_case *c = &cases[i];
        char *got = render(renderer, c->msgs, c->tools, think_of(c->think));
        if (strcmp(got, c->want) != 0)
            fail_msg("%s %s:\n got: %s\nwant: %s", renderer, c->name, got, c->want);
        free(got);
    }
}

static void test_reference(void **state)
{
    (void)state;
    size_t n = sizeof(reference_cases) / sizeof(reference_cases[0]);
    run_cases("gemma4", reference_cases, n);
    run_cases("gemma4-small", reference_cases, n);
}

// ---------------------------------------------------------------------------
// Declarations of array items, checked in Ollama against both templates
// (TestGemma4RendererMatchesJinja2ExpandedParity).

#define ITEMS_PROMPT(decl)                                                                         \
    "<bos><|turn>system\n" decl "<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"

static const struct render_case items_cases[] = {
    {"array_items_object_with_required", "[{'role':'user','content':'Hi'}]",
     "[{'type':'function','function':{'name':'upsert_batch','description':'Upsert batch',"
     "'parameters':{'type':'object','properties':{'entries':{'type':'array',"
     "'description':'Entries','items':{'type':'object','required':['id'],'properties':{"
     "'id':{'type':'string','description':'ID'},'count':{'type':'number',"
     "'description':'Count'}}}}}}}}]",
     THINK_UNSET,
     ITEMS_PROMPT("<|tool>declaration:upsert_batch{description:" Q "Upsert batch" Q
                  ",parameters:{properties:{entries:{description:" Q "Entries" Q
                  ",items:{properties:{count:{description:" Q "Count" Q ",type:" Q "NUMBER" Q
                  "},id:{description:" Q "ID" Q ",type:" Q "STRING" Q "}},required:[" Q "id" Q
                  "],type:" Q "OBJECT" Q "},type:" Q "ARRAY" Q "}},type:" Q "OBJECT" Q
                  "}}<tool|>")},
    {"array_items_object_with_nested_object_and_array_properties",
     "[{'role':'user','content':'Hi'}]",
     "[{'type':'function','function':{'name':'plan_batch','description':'Plan batch',"
     "'parameters':{'type':'object','properties':{'steps':{'type':'array','description':'Steps',"
     "'items':{'type':'object','required':['name'],'properties':{'name':{'type':'string',"
     "'description':'Name'},'config':{'type':'object','description':'Config',"
     "'required':['enabled'],'properties':{'enabled':{'type':'boolean',"
     "'description':'Enabled'}}},'tags':{'type':'array','description':'Tags',"
     "'items':{'type':'string'}}}}}}}}}]",
     THINK_UNSET,
     ITEMS_PROMPT("<|tool>declaration:plan_batch{description:" Q "Plan batch" Q
                  ",parameters:{properties:{steps:{description:" Q "Steps" Q
                  ",items:{properties:{config:{description:" Q "Config" Q
                  ",properties:{enabled:{description:" Q "Enabled" Q ",type:" Q "BOOLEAN" Q
                  "}},required:[" Q "enabled" Q "],type:" Q "OBJECT" Q "},name:{description:" Q
                  "Name" Q ",type:" Q "STRING" Q "},tags:{description:" Q "Tags" Q ",items:{type:" Q
                  "STRING" Q "},type:" Q "ARRAY" Q "}},required:[" Q "name" Q "],type:" Q "OBJECT" Q
                  "},type:" Q "ARRAY" Q "}},type:" Q "OBJECT" Q "}}<tool|>")},
    {"array_items_nested_array_of_objects", "[{'role':'user','content':'Hi'}]",
     "[{'type':'function','function':{'name':'schedule_jobs','description':'Schedule jobs',"
     "'parameters':{'type':'object','properties':{'jobs':{'type':'array','description':'Jobs',"
     "'items':{'type':'object','required':['tasks'],'properties':{'tasks':{'type':'array',"
     "'description':'Tasks','items':{'type':'object','required':['command'],'properties':{"
     "'command':{'type':'string','description':'Command'},'timeout':{'type':'number',"
     "'description':'Timeout'}}}}}}}}}}}]",
     THINK_UNSET,
     ITEMS_PROMPT("<|tool>declaration:schedule_jobs{description:" Q "Schedule jobs" Q
                  ",parameters:{properties:{jobs:{description:" Q "Jobs" Q
                  ",items:{properties:{tasks:{description:" Q "Tasks" Q
                  ",items:{properties:{command:{description:" Q "Command" Q ",type:" Q "STRING" Q
                  "},timeout:{description:" Q "Timeout" Q ",type:" Q "NUMBER" Q "}},required:[" Q
                  "command" Q "],type:" Q "OBJECT" Q "},type:" Q "ARRAY" Q "}},required:[" Q
                  "tasks" Q "],type:" Q "OBJECT" Q "},type:" Q "ARRAY" Q "}},type:" Q "OBJECT" Q
                  "}}<tool|>")},
    {"array_items_union_type", "[{'role':'user','content':'Hi'}]",
     "[{'type':'function','function':{'name':'maybe_batch','description':'Maybe batch',"
     "'parameters':{'type':'object','properties':{'values':{'type':'array',"
     "'description':'Values','items':{'type':['string','null']}}}}}}]",
     THINK_UNSET,
     ITEMS_PROMPT("<|tool>declaration:maybe_batch{description:" Q "Maybe batch" Q
                  ",parameters:{properties:{values:{description:" Q "Values" Q ",items:{type:[" Q
                  "STRING" Q "," Q "NULL" Q "]},type:" Q "ARRAY" Q "}},type:" Q "OBJECT" Q
                  "}}<tool|>")},
    {"array_items_nested_nullable_properties", "[{'role':'user','content':'Hi'}]",
     "[{'type':'function','function':{'name':'annotate_batch','description':'Annotate batch',"
     "'parameters':{'type':'object','properties':{'entries':{'type':'array',"
     "'description':'Entries','items':{'type':'object','required':['note'],'properties':{"
     "'note':{'type':'string','description':'Note','nullable':true},'metadata':{"
     "'type':'object','description':'Metadata','nullable':true,'properties':{'tag':{"
     "'type':'string','description':'Tag'}}}}}}}}}}]",
     THINK_UNSET,
     ITEMS_PROMPT("<|tool>declaration:annotate_batch{description:" Q "Annotate batch" Q
                  ",parameters:{properties:{entries:{description:" Q "Entries" Q
                  ",items:{properties:{metadata:{description:" Q "Metadata" Q
                  ",nullable:true,properties:{tag:{description:" Q "Tag" Q ",type:" Q "STRING" Q
                  "}},type:" Q "OBJECT" Q "},note:{description:" Q "Note" Q ",nullable:true,type:" Q
                  "STRING" Q "}},required:[" Q "note" Q "],type:" Q "OBJECT" Q "},type:" Q "ARRAY" Q
                  "}},type:" Q "OBJECT" Q "}}<tool|>")},
    {"array_items_extra_keys", "[{'role':'user','content':'Hi'}]",
     "[{'type':'function','function':{'name':'configure_batch','description':'Configure batch',"
     "'parameters':{'type':'object','properties':{'settings':{'type':'array',"
     "'description':'Settings','items':{'type':'object','additionalProperties':false,"
     "'default':{'mode':'auto'},'nullable':true,'required':['mode'],'properties':{'mode':{"
     "'type':'string','description':'Mode'}}}}}}}}]",
     THINK_UNSET,
     ITEMS_PROMPT("<|tool>declaration:configure_batch{description:" Q "Configure batch" Q
                  ",parameters:{properties:{settings:{description:" Q "Settings" Q
                  ",items:{additionalProperties:false,default:{" Q "mode" Q ":" Q "auto" Q
                  "},nullable:true,properties:{mode:{description:" Q "Mode" Q ",type:" Q "STRING" Q
                  "}},required:[" Q "mode" Q "],type:" Q "OBJECT" Q "},type:" Q "ARRAY" Q
                  "}},type:" Q "OBJECT" Q "}}<tool|>")},
};

static void test_items_declarations(void **state)
{
    (void)state;
    run_cases("gemma4", items_cases, sizeof(items_cases) / sizeof(items_cases[0]));
}

// ---------------------------------------------------------------------------
// Renderer variants, think levels, tool result names, images

static void test_variants(void **state)
{
    (void)state;
    const char *hello = "[{'role':'user','content':'Hello'}]";
    char *got = render("gemma4", hello, NULL, NULL);
    assert_string_equal(got, "<bos><|turn>user\nHello<turn|>\n<|turn>model\n");
    free(got);
    got = render("gemma4-small", hello, NULL, NULL);
    assert_string_equal(got, "<bos><|turn>user\nHello<turn|>\n<|turn>model\n");
    free(got);
    // The large templates open an empty thought block when thinking is off…
    got = render("gemma4-large", hello, NULL, NULL);
    assert_string_equal(
        got, "<bos><|turn>user\nHello<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
    free(got);
    got = render("gemma4-large", hello, NULL, &think_false);
    assert_string_equal(
        got, "<bos><|turn>user\nHello<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
    free(got);
    // …and not when it is on.
    got = render("gemma4-large", hello, NULL, &think_true);
    assert_string_equal(got, "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHello<turn|>\n"
                             "<|turn>model\n");
    free(got);

    // A think level is thinking on (Gemma 4 has no levels).
    got = render("gemma4", hello, NULL, &think_high);
    assert_string_equal(got, "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHello<turn|>\n"
                             "<|turn>model\n");
    free(got);
}

// TestGemma4RendererCanonicalToolContinuations: an assistant message, then
// one with a call, its result and a final answer, all one model turn.
static void test_tool_continuations(void **state)
{
    (void)state;
    const char *msgs =
        "[{'role':'user','content':'Use the tool'},{'role':'assistant','content':'First.'},"
        "{'role':'assistant','content':'Checking.','tool_calls':[{'function':{'name':'bash',"
        "'arguments':{'command':null}}}]}," TOOL_RESULT("bash", "done") ","
                                                                        "{'role':'assistant',"
                                                                        "'content':'Done.'},"
                                                                        "{'role':'user',"
                                                                        "'content':'Next'}]";
#define CONTINUATION_BASE                                                                          \
    "<bos><|turn>system\n" BASH_SMALL_DECL "<turn|>\n<|turn>user\nUse the tool<turn|>\n"           \
    "<|turn>model\nFirst.<|tool_call>call:bash{command:null}<tool_call|>" RESPONSE(                \
        "bash", "done") "Checking.Done.<turn|>\n<|turn>user\nNext<turn|>\n<|turn>model\n"
    char *got = render("gemma4-small", msgs, "[" BASH_SMALL_TOOL "]", NULL);
    assert_string_equal(got, CONTINUATION_BASE);
    free(got);
    got = render("gemma4-large", msgs, "[" BASH_SMALL_TOOL "]", NULL);
    assert_string_equal(got, CONTINUATION_BASE "<|channel>thought\n<channel|>");
    free(got);
#undef CONTINUATION_BASE

    // Adjacent assistants after a tool result continue the same turn.
    got = render("gemma4",
                 "[{'role':'user','content':'Go'}," BASH_CALL("ls") "," TOOL_RESULT(
                     "bash", "file1.txt") ",{'role':'assistant','content':'First.'},"
                                          "{'role':'assistant','content':'Second.'},"
                                          "{'role':'user','content':'Next'}]",
                 "[" BASH_SMALL_TOOL "]", NULL);
    assert_string_equal(got, "<bos><|turn>system\n" BASH_SMALL_DECL
                             "<turn|>\n<|turn>user\nGo<turn|>\n<|turn>model\n" BASH_CALL_TEXT("ls")
                                 RESPONSE("bash", "file1.txt") "First.Second.<turn|>\n"
                                                               "<|turn>user\nNext<turn|>\n"
                                                               "<|turn>model\n");
    free(got);

    // The thinking of a pending call (after the last user message) is shown;
    // thinking on opens nothing after a pending call.
    got = render("gemma4",
                 "[{'role':'system','content':'You are helpful.'},"
                 "{'role':'user','content':'List files'},{'role':'assistant','thinking':'Use bash',"
                 "'tool_calls':[{'function':{'name':'bash','arguments':{'command':'ls'}}}]}]",
                 "[" BASH_SMALL_TOOL "]", &think_true);
    assert_string_equal(
        got, "<bos><|turn>system\n<|think|>\nYou are helpful." BASH_SMALL_DECL
             "<turn|>\n<|turn>user\nList files<turn|>\n<|turn>model\n"
             "<|channel>thought\nUse bash\n<channel|>" BASH_CALL_TEXT("ls") "<|tool_response>");
    free(got);
}

static void test_tool_result_names(void **state)
{
    (void)state;
    const char *calls = "{'role':'user','content':'List and read'},{'role':'assistant',"
                        "'tool_calls':[{'id':'call_bash','function':{'name':'bash','arguments':{"
                        "'command':'ls'}}},{'id':'call_read','function':{'name':'read',"
                        "'arguments':{'path':'go.mod'}}}]}";
    char msgs[1024];
    // tool_call_id names the call answered, whatever the order.
    snprintf(msgs, sizeof(msgs),
             "[%s,{'role':'tool','tool_call_id':'call_read','content':'module example.com/foo'},"
             "{'role':'tool','tool_call_id':'call_bash','content':'file1.txt'}]",
             calls);
    char *got = render("gemma4", msgs, "[" BASH_TOOL "," READ_TOOL "]", NULL);
    assert_non_null(
        strstr(got, RESPONSE("read", "module example.com/foo") RESPONSE("bash", "file1.txt")));
    free(got);
    // Without an id the tool_name stands; without either, "unknown".
    snprintf(msgs, sizeof(msgs), "[%s,{'role':'tool','tool_name':'bash','content':'payload'}]",
             calls);
    got = render("gemma4", msgs, "[" BASH_TOOL "," READ_TOOL "]", NULL);
    assert_non_null(strstr(got, RESPONSE("bash", "payload")));
    free(got);
    snprintf(msgs, sizeof(msgs), "[%s,{'role':'tool','content':'payload'}]", calls);
    got = render("gemma4", msgs, "[" BASH_TOOL "," READ_TOOL "]", NULL);
    assert_non_null(strstr(got, RESPONSE("unknown", "payload")));
    assert_null(strstr(got, RESPONSE("read", "payload")));
    free(got);
    // An id that matches no call keeps the tool_name.
    snprintf(msgs, sizeof(msgs),
             "[%s,{'role':'tool','tool_call_id':'nope','tool_name':'x','content':'p'}]", calls);
    got = render("gemma4", msgs, NULL, NULL);
    assert_non_null(strstr(got, RESPONSE("x", "p")));
    free(got);
    // A tool message with no call before it is not rendered.
    got = render("gemma4", "[{'role':'user','content':'Hi'},{'role':'tool','content':'stray'}]",
                 NULL, NULL);
    assert_string_equal(got, "<bos><|turn>user\nHi<turn|>\n<|turn>model\n");
    free(got);
}

// A simple anyOf of bare types becomes the typed union; other schema
// details: parameters without properties, names that are schema keywords.
static void test_declaration_details(void **state)
{
    (void)state;
    char *got = render("gemma4", "[{'role':'user','content':'Pick'}]", "[" ANYOF_TOOL "]", NULL);
    assert_non_null(
        strstr(got, "value:{description:" Q "Value" Q ",type:" Q "['STRING', 'NUMBER']" Q "}"));
    free(got);
    // An anyOf branch with more than a type gives no type at all.
    got = render("gemma4", "[{'role':'user','content':'Pick'}]",
                 "[{'type':'function','function':{'name':'f','description':'d','parameters':{"
                 "'type':'object','properties':{'v':{'anyOf':[{'type':'string','description':'s'},"
                 "{'type':'number'}]}}}}}]",
                 NULL);
    assert_non_null(strstr(got, "properties:{v:{}}"));
    free(got);
    // No parameters at all; a description-less tool.
    got = render("gemma4", "[{'role':'user','content':'x'}]",
                 "[{'type':'function','function':{'name':'now'}}]", NULL);
    assert_non_null(strstr(got, "<|tool>declaration:now{description:" Q Q "}<tool|>"));
    free(got);
    // Properties named like schema keywords are left out (as the template
    // does); enum values that are numbers print as Go's %v; integral numbers
    // in items defaults print as integers, others as %v.
    got = render("gemma4", "[{'role':'user','content':'x'}]",
                 "[{'type':'function','function':{'name':'f','description':'d','parameters':{"
                 "'type':'object','properties':{'type':{'type':'string'},'level':{"
                 "'type':'string','enum':[1,2.5,'x']},'list':{'type':'array','items':{"
                 "'type':'number','minimum':0,'maximum':1.5,'format':null}}}}}}]",
                 NULL);
    assert_non_null(strstr(got,
                           "parameters:{properties:{level:{enum:[" Q "1" Q "," Q "2.5" Q "," Q "x" Q
                           "],type:" Q "STRING" Q "},list:{items:{maximum:1.5,minimum:0,type:" Q
                           "NUMBER" Q "},type:" Q "ARRAY" Q "}},type:" Q "OBJECT" Q "}"));
    free(got);
}

// The server renders [img-N] tags for images: in front of the text, or in
// place of [img] placeholders, numbered across the conversation (tool
// results included).
static void test_images(void **state)
{
    (void)state;
    char *got =
        render("gemma4",
               "[{'role':'user','content':'  What is this?  ','images':['aGk=']},"
               "{'role':'assistant','content':'A cat.'},"
               "{'role':'user','content':'Compare [img] and [img]','images':['aGk=','aGk=']}]",
               NULL, NULL);
    assert_string_equal(got, "<bos><|turn>user\n[img-0] What is this?<turn|>\n<|turn>model\nA cat."
                             "<turn|>\n<|turn>user\nCompare [img-1] and [img-2]<turn|>\n"
                             "<|turn>model\n");
    free(got);
    got = render(
        "gemma4",
        "[{'role':'user','content':'Shot'}," BASH_CALL(
            "screenshot") ","
                          "{'role':'tool','tool_name':'bash','content':'','images':['aGk=']},"
                          "{'role':'user','content':'Again','images':['aGk=']}]",
        NULL, NULL);
    assert_non_null(strstr(got, RESPONSE("bash", "[img-0]") "<turn|>\n<|turn>user\n[img-1] Again"));
    free(got);
}

// ---------------------------------------------------------------------------
// Parser (TestGemma4Parser and friends)

struct parse_case {
    const char *name;
    const char *input;
    bool thinking;
    const char *last;
    const char *tools;
    const char *content, *thought, *calls;
};

static const struct parse_case parse_cases[] = {
    {"simple_content", "This is a simple response.", false, NULL, NULL,
     "This is a simple response.", "", "[]"},
    {"thinking_then_content",
     "<|channel>thought\nLet me think about this...<channel|>The answer is 42.", true, NULL, NULL,
     "The answer is 42.", "Let me think about this...", "[]"},
    {"multiple_thinking_blocks",
     "<|channel>first thought<channel|><|channel>second thought<channel|>Final answer.", true, NULL,
     NULL, "Final answer.", "first thoughtsecond thought", "[]"},
    {"thinking_only_no_content", "<|channel>just thinking<channel|>", true, NULL, NULL, "",
     "just thinking", "[]"},
    {"tool_call_simple", "<|tool_call>call:get_weather{location:" Q "Paris" Q "}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}}]"},
    {"tool_call_with_multiple_args",
     "<|tool_call>call:get_weather{location:" Q "Paris" Q ",units:" Q "metric" Q "}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris',"
     "'units':'metric'}}}]"},
    {"tool_call_with_number_arg", "<|tool_call>call:set_temp{value:42}<tool_call|>", false, NULL,
     NULL, "", "", "[{'function':{'index':0,'name':'set_temp','arguments':{'value':42}}}]"},
    {"tool_call_with_boolean_arg", "<|tool_call>call:toggle{enabled:true}<tool_call|>", false, NULL,
     NULL, "", "", "[{'function':{'index':0,'name':'toggle','arguments':{'enabled':true}}}]"},
    {"tool_call_with_null_arg",
     "<|tool_call>call:set_optional{value:null,nested:{value:null}}<tool_call|>", false, NULL, NULL,
     "", "",
     "[{'function':{'index':0,'name':'set_optional','arguments':{'value':null,"
     "'nested':{'value':null}}}}]"},
    {"tool_call_with_nested_object",
     "<|tool_call>call:process{config:{enabled:true,name:" Q "test" Q "}}<tool_call|>", false, NULL,
     NULL, "", "",
     "[{'function':{'index':0,'name':'process','arguments':{'config':{'enabled':true,"
     "'name':'test'}}}}]"},
    {"tool_call_with_array",
     "<|tool_call>call:process{items:[" Q "a" Q "," Q "b" Q "]}<tool_call|>", false, NULL, NULL, "",
     "", "[{'function':{'index':0,'name':'process','arguments':{'items':['a','b']}}}]"},
    {"tool_call_with_array_of_multiple_gemma_quoted_strings",
     "<|tool_call>call:process{items:[" Q "a" Q "," Q "b \"quoted\"" Q "," Q "c" Q "]}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'process','arguments':{'items':['a','b "
     "\\'quoted\\'','c']}}}]"},
    {"tool_call_with_multiline_string_arg",
     "<|tool_call>call:bash{command:" Q "date\n" Q "}<tool_call|>", false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'bash','arguments':{'command':'date\\n'}}}]"},
    {"tool_call_with_escaped_double_quotes_in_string_arg",
     "<|tool_call>call:search{query:" Q "say \\\"hello\\\"" Q "}<tool_call|>", false, NULL, NULL,
     "", "",
     "[{'function':{'index':0,'name':'search','arguments':{'query':'say \\\\\\'hello\\\\\\''}}}]"},
    {"tool_call_with_multiple_unescaped_double_quote_segments",
     "<|tool_call>call:search{query:" Q "say \"hello\", then \"goodbye\"" Q "}<tool_call|>", false,
     NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'search','arguments':{'query':"
     "'say \\'hello\\', then \\'goodbye\\''}}}]"},
    {"tool_call_exec_with_embedded_quoted_url",
     "<|tool_call>call:exec{command:" Q "fetch \"https://ollama.com/library/gemma4\" --extract" Q
     "}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'exec','arguments':{'command':"
     "'fetch \\'https://ollama.com/library/gemma4\\' --extract'}}}]"},
    {"tool_call_done_flush_without_close_tag_with_unescaped_double_quotes",
     "<|tool_call>call:search{query:" Q "say \"hello\" and \"bye\"" Q "}", false, NULL, NULL, "",
     "",
     "[{'function':{'index':0,'name':'search','arguments':{'query':"
     "'say \\'hello\\' and \\'bye\\''}}}]"},
    {"tool_call_with_mixed_raw_and_gemma_quoted_values",
     "<|tool_call>call:search{query:\"raw \\\"quoted\\\"\",note:" Q "gemma \"quoted\"" Q
     "}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'search','arguments':{'query':'raw \\'quoted\\'',"
     "'note':'gemma \\'quoted\\''}}}]"},
    {"tool_call_with_array_of_objects_and_mixed_quotes",
     "<|tool_call>call:plan{steps:[{title:" Q "step \"one\"" Q ",done:false},{title:" Q
     "step \\\"two\\\"" Q ",done:true}]}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'plan','arguments':{'steps':[{'title':'step \\'one\\'',"
     "'done':false},{'title':'step \\\\\\'two\\\\\\'','done':true}]}}}]"},
    {"tool_call_edit_with_array_of_objects_issue_comment_spacing",
     "<|tool_call>call:edit{edits:[\n  {newText:" Q "# guide..." Q ",\n   oldText:" Q "# old\\n" Q
     "}\n]}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'edit','arguments':{'edits':[{'newText':'# guide...',"
     "'oldText':'# old\\\\n'}]}}}]"},
    {"tool_call_with_windows_path_single_backslashes",
     "<|tool_call>call:open_file{path:" Q "C:\\users\\bob\\file.txt" Q "}<tool_call|>", false, NULL,
     NULL, "", "",
     "[{'function':{'index':0,'name':'open_file','arguments':{'path':"
     "'C:\\\\users\\\\bob\\\\file.txt'}}}]"},
    {"multiple_tool_calls",
     "<|tool_call>call:get_weather{location:" Q "Paris" Q "}<tool_call|><|tool_call>call:"
     "get_weather{location:" Q "London" Q "}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}},"
     "{'function':{'index':1,'name':'get_weather','arguments':{'location':'London'}}}]"},
    {"thinking_then_tool_call",
     "<|channel>thought\nI need to check the weather<channel|><|tool_call>call:get_weather{"
     "location:" Q "Paris" Q "}<tool_call|>",
     true, NULL, NULL, "", "I need to check the weather",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}}]"},
    {"content_then_tool_call",
     "Let me check that for you.<|tool_call>call:get_weather{location:" Q "Paris" Q "}<tool_call|>",
     false, NULL, NULL, "Let me check that for you.", "",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}}]"},
    {"thinking_disabled_channel_tags_as_content",
     "<|channel>this is not thinking<channel|>actual content", false, NULL, NULL, "actual content",
     "", "[]"},
    {"prefill_content_only", "Continuing content.", true,
     "{'role':'assistant','content':'Previous content'}", NULL, "Continuing content.", "", "[]"},
    // TestGemma4Parser_ToolResponseContinuationStartsInThinking.
    {"tool_response_continuation_starts_in_thinking",
     "The user asked for files.<channel|>go.mod and go.sum", true,
     "{'role':'tool','content':'go.mod\\ngo.sum\\n'}", NULL, "go.mod and go.sum",
     "The user asked for files.", "[]"},
    // Gemma-quoted scalars stay strings; bare ones keep their JSON types.
    {"quoted_scalars_stay_strings",
     "<|tool_call>call:foo{n:" Q "1" Q ",b:" Q "true" Q ",z:" Q "null" Q "}<tool_call|>", false,
     NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'foo','arguments':{'n':'1','b':'true','z':'null'}}}]"},
    {"unquoted_scalars_keep_types", "<|tool_call>call:foo{n:1,b:true,z:null,f:-2.5e3}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'foo','arguments':{'n':1,'b':true,'z':null,'f':-2500.0}}}]"},
    {"reference_implementation_example",
     "<|tool_call>call:get_current_temperature{detail_level:0,location:" Q "Paris, France" Q
     ",unit:" Q "celsius" Q "}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'get_current_temperature','arguments':{'detail_level':0,"
     "'location':'Paris, France','unit':'celsius'}}}]"},
    {"raw_quoted_structural_string", "<|tool_call>call:foo{q:\"a,b:c\"}<tool_call|>", false, NULL,
     NULL, "", "", "[{'function':{'index':0,'name':'foo','arguments':{'q':'a,b:c'}}}]"},
    {"raw_quoted_string_containing_key_like_text",
     "<|tool_call>call:foo{q:\"keep , oldText: literal\",note:" Q "ok" Q "}<tool_call|>", false,
     NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'foo','arguments':{'q':'keep , oldText: literal',"
     "'note':'ok'}}}]"},
    {"gemma_string_with_structural_chars",
     "<|tool_call>call:foo{query:" Q "a,b:{c}[d]" Q ",u:" Q "snowman:\\u2603 \\x" Q "}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'foo','arguments':{'query':'a,b:{c}[d]',"
     "'u':'snowman:\\\\u2603 \\\\x'}}}]"},
    {"nested_mixed_raw_and_gemma_quoted_values",
     "<|tool_call>call:foo{meta:{title:" Q "t \"1\"" Q ",note:\"n \\\"2\\\"\"},items:[" Q
     "x \"3\"" Q ",\"y \\\"4\\\"\"]}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'foo','arguments':{'meta':{'title':'t \\'1\\'',"
     "'note':'n \\'2\\''},'items':['x \\'3\\'','y \\'4\\'']}}}]"},
    // TestGemma4ArgsToJSON: white space around bare keys, JSON escapes in
    // raw strings, empty objects.
    {"spaces_around_bare_keys",
     "<|tool_call>call:edit{edits:[{ newText:" Q "a" Q ", oldText:" Q "b" Q "} ],\n more:{}}"
     "<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'edit','arguments':{'edits':[{'newText':'a',"
     "'oldText':'b'}],'more':{}}}}]"},
    {"raw_json_escapes",
     "<|tool_call>call:f{q:\"keep , oldText: and \\\"quoted\\\" text\",url:" Q "https:\\/\\/x.com" Q
     ",p:\"C:\\\\Temp\"}<tool_call|>",
     false, NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'f','arguments':{'q':'keep , oldText: and \\'quoted\\' "
     "text','url':'https:\\\\/\\\\/x.com','p':'C:\\\\Temp'}}}]"},
    {"non_ascii_bare_keys", "<|tool_call>call:f{städte:[" Q "Köln" Q "],n2_x:1}<tool_call|>", false,
     NULL, NULL, "", "",
     "[{'function':{'index':0,'name':'f','arguments':{'städte':['Köln'],'n2_x':1}}}]"},
    // Extra <tool_call|> or a <|tool_response> after a call are dropped.
    {"extra_close_tags",
     "<|tool_call>call:get_weather{location:" Q "Paris" Q "}<tool_call|><tool_call|>Done.", false,
     NULL, NULL, "Done.", "",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}}]"},
    {"extra_close_tag_at_end",
     "<|tool_call>call:get_weather{location:" Q "Paris" Q "}<tool_call|><tool_call|>", false, NULL,
     NULL, "", "",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}}]"},
    {"tool_response_boundary",
     "<|tool_call>call:get_weather{location:" Q "Paris" Q "}<tool_call|> <|tool_response> Done.",
     false, NULL, NULL, "Done.", "",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}}]"},
    {"partial_noise_at_end_dropped",
     "<|tool_call>call:get_weather{location:" Q "Paris" Q "}<tool_call|><|tool_res", false, NULL,
     NULL, "", "",
     "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}}]"},
    // White space around markers.
    {"whitespace_around_markers",
     "Sure. \n<|tool_call>call:f{}<tool_call|>\n\nAnd <|channel>thought\n  hmm  <channel|>  done",
     true, NULL, NULL, "Sure.Anddone", "  hmm",
     "[{'function':{'index':0,'name':'f','arguments':{}}}]"},
    // A channel without the "thought" name keeps its text.
    {"channel_without_name", "<|channel>plain<channel|>x", true, NULL, NULL, "x", "plain", "[]"},
    // Thinking that never closes is thinking.
    {"unclosed_thinking", "<|channel>thought\nstill going ", true, NULL, NULL, "", "still going ",
     "[]"},
};

// Repairs of calls the model left malformed
// (TestParseGemma4ToolCall_Repairs*): they need the tool's schema.
#define STRING_TOOL(name, props)                                                                   \
    "{'type':'function','function':{'name':'" name "','parameters':{'type':'object',"              \
    "'properties':{" props "}}}}"
#define STR_PROP(n) "'" n "':{'type':'string'}"

static const struct parse_case repair_cases[] = {
    {"raw_multiline_string",
     "<|tool_call>call:write{content:\n\n# Style Guide for Agents' Code\n\nThis document, "
     "designed to ensure consistency.<tool_call|>",
     false, NULL, "[" STRING_TOOL("write", STR_PROP("content")) "]", "", "",
     "[{'function':{'index':0,'name':'write','arguments':{'content':"
     "'\\n\\n# Style Guide for Agents\\u0027 Code\\n\\nThis document, designed to ensure "
     "consistency.'}}}]"},
    {"single_quoted_value_with_dangling_delimiter",
     "<|tool_call>call:grep{include:" Q "*.py" Q ",output_mode:" Q "content" Q ",path:" Q
     "/data/robotics/experiment1" Q ",pattern:':\\s*\\w+'" Q "}<tool_call|>",
     false, NULL,
     "[" STRING_TOOL("grep", STR_PROP("include") "," STR_PROP("output_mode") "," STR_PROP(
                                 "path") "," STR_PROP("pattern")) "]",
     "", "",
     "[{'function':{'index':0,'name':'grep','arguments':{'include':'*.py',"
     "'output_mode':'content','path':'/data/robotics/experiment1','pattern':"
     "':\\\\s*\\\\w+'}}}]"},
    {"unclosed_gemma_string_before_object_close", "<|tool_call>call:bash{command:" Q "ls}", false,
     NULL, "[" STRING_TOOL("bash", STR_PROP("command")) "]", "", "",
     "[{'function':{'index':0,'name':'bash','arguments':{'command':'ls'}}}]"},
    {"single_quoted_middle_property",
     "<|tool_call>call:grep{include:" Q "*.py" Q ",pattern:'abc',path:" Q "/tmp" Q "}<tool_call|>",
     false, NULL,
     "[" STRING_TOOL("grep", STR_PROP("include") "," STR_PROP("pattern") "," STR_PROP("path")) "]",
     "", "",
     "[{'function':{'index':0,'name':'grep','arguments':{'include':'*.py','pattern':'abc',"
     "'path':'/tmp'}}}]"},
    {"unclosed_gemma_string_terminal_property",
     "<|tool_call>call:bash{path:" Q "/tmp" Q ",command:" Q "ls}<tool_call|>", false, NULL,
     "[" STRING_TOOL("bash", STR_PROP("path") "," STR_PROP("command")) "]", "", "",
     "[{'function':{'index':0,'name':'bash','arguments':{'path':'/tmp','command':'ls'}}}]"},
    {"raw_string_before_next_property",
     "<|tool_call>call:write{content:hello,mode:" Q "fast" Q "}<tool_call|>", false, NULL,
     "[" STRING_TOOL("write", STR_PROP("content") "," STR_PROP("mode")) "]", "", "",
     "[{'function':{'index':0,'name':'write','arguments':{'content':'hello','mode':'fast'}}}]"},
    {"unclosed_string_at_end", "<|tool_call>call:bash{command:" Q "ls", false, NULL,
     "[" STRING_TOOL("bash", STR_PROP("command")) "]", "", "",
     "[{'function':{'index':0,'name':'bash','arguments':{'command':'ls'}}}]"},
    {"raw_string_without_object_close", "<|tool_call>call:write{content:hello<tool_call|>", false,
     NULL, "[" STRING_TOOL("write", STR_PROP("content")) "]", "", "",
     "[{'function':{'index':0,'name':'write','arguments':{'content':'hello'}}}]"},
    {"string_in_anyof_branch", "<|tool_call>call:w{c:some words}<tool_call|>", false, NULL,
     "[{'type':'function','function':{'name':'w','parameters':{'type':'object','properties':{"
     "'c':{'anyOf':[{'type':'null'},{'type':'STRING'}]}}}}}]",
     "", "", "[{'function':{'index':0,'name':'w','arguments':{'c':'some words'}}}]"},
};

static void check_parse_case(const char *parser, const struct parse_case *c,
                             const char *const *pieces)
{
    struct parsed r;
    parse_steps(&r, parser, c->tools, c->last, c->thinking ? &think_true : NULL, pieces);
    if (r.rc != 0)
        fail_msg("%s %s: rc %d: %s", parser, c->name, r.rc, r.e.msg);
    if (strcmp(buf_cstr(&r.content), c->content) != 0)
        fail_msg("%s %s: content %s, want %s", parser, c->name, buf_cstr(&r.content), c->content);
    if (strcmp(buf_cstr(&r.thinking), c->thought) != 0)
        fail_msg("%s %s: thinking %s, want %s", parser, c->name, buf_cstr(&r.thinking), c->thought);
    assert_calls(r.calls, c->calls);
    parsed_deinit(&r);
}

static void test_parser_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++)
        check_parse_case("gemma4", &parse_cases[i], (const char *[]){parse_cases[i].input, NULL});
    for (size_t i = 0; i < sizeof(repair_cases) / sizeof(repair_cases[0]); i++)
        check_parse_case("gemma4", &repair_cases[i], (const char *[]){repair_cases[i].input, NULL});
}

// Every case again, streamed: split in two at every byte, and one byte at a
// time. Cases whose markers touch white space are left out (white space
// already sent before a marker arrives stays sent, as in Ollama).
static void test_parser_streaming(void **state)
{
    (void)state;
    const struct parse_case *all[sizeof(parse_cases) / sizeof(parse_cases[0]) +
                                 sizeof(repair_cases) / sizeof(repair_cases[0])];
    size_t n = 0;
    for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++)
        all[n++] = &parse_cases[i];
    for (size_t i = 0; i < sizeof(repair_cases) / sizeof(repair_cases[0]); i++)
        all[n++] = &repair_cases[i];
    for (size_t k = 0; k < n; k++) {
        const struct parse_case *c = all[k];
        if (!strcmp(c->name, "whitespace_around_markers") ||
            !strcmp(c->name, "tool_response_boundary") || !strcmp(c->name, "unclosed_thinking"))
            continue;
        size_t len = strlen(c->input);
        for (size_t cut = 1; cut < len; cut++) {
            char *a = xstrndup(c->input, cut);
            check_parse_case("gemma4", c, (const char *[]){a, c->input + cut, NULL});
            free(a);
        }
        const char **bytes = xcalloc(len + 1, sizeof(*bytes));
        char *storage = xcalloc(len, 2);
        for (size_t i = 0; i < len; i++) {
            storage[2 * i] = c->input[i];
            bytes[i] = &storage[2 * i];
        }
        check_parse_case("gemma4", c, bytes);
        free(bytes);
        free(storage);
    }
}

// Pieces as Ollama's streaming tests send them: partial markers are held
// back until resolved.
static void test_parser_partial_markers(void **state)
{
    (void)state;
    struct parsed r;
    // TestGemma4Parser_Streaming.
    parse_steps(&r, "gemma4", NULL, NULL, &think_true,
                (const char *[]){"<|channel>thought", "\nLet me think", "...<channel|>The answer",
                                 " is 42.", NULL});
    assert_string_equal(buf_cstr(&r.content), "The answer is 42.");
    assert_string_equal(buf_cstr(&r.thinking), "Let me think...");
    parsed_deinit(&r);
    // TestGemma4Parser_StreamingToolCall.
    parse_steps(&r, "gemma4-no-thinking", NULL, NULL, NULL,
                (const char *[]){"<|tool_call>call:get_", "weather{location:" Q "Par",
                                 "is" Q "}<tool_call|>", NULL});
    assert_string_equal(buf_cstr(&r.content), "");
    assert_calls(
        r.calls,
        "[{'function':{'index':0,'name':'get_weather','arguments':{'location':'Paris'}}}]");
    parsed_deinit(&r);
    // TestGemma4Parser_IgnoresExtraToolCallCloseTags / ToolResponseBoundary.
    parse_steps(&r, "gemma4-no-thinking", NULL, NULL, NULL,
                (const char *[]){"<|tool_call>call:f{}<tool_call|><tool_", "call|>Done.", NULL});
    assert_string_equal(buf_cstr(&r.content), "Done.");
    assert_int_equal(json_array_size(r.calls), 1);
    parsed_deinit(&r);
    parse_steps(
        &r, "gemma4-no-thinking", NULL, NULL, NULL,
        (const char *[]){"<|tool_call>call:f{}<tool_call|><|tool_res", "ponse>Done.", NULL});
    assert_string_equal(buf_cstr(&r.content), "Done.");
    parsed_deinit(&r);

    // What each piece releases: text before a partial marker (and the white
    // space before it) goes out at once, the partial marker waits.
    struct renderer_parser *p = NULL;
    struct err e = {0};
    assert_int_equal(renderer_parser_new(&p, "gemma4", NULL, NULL, &think_true, &e), 0);
    struct buf content, thinking;
    buf_init(&content, 0);
    buf_init(&thinking, 0);
    json_t *calls = json_array();
    assert_int_equal(
        renderer_parser_add(p, "Hello <|chan", 12, false, &content, &thinking, calls, &e), 0);
    assert_string_equal(buf_cstr(&content), "Hello");
    assert_int_equal(renderer_parser_add(p, "nel>thou", 8, false, &content, &thinking, calls, &e),
                     0);
    assert_string_equal(buf_cstr(&thinking), "");
    assert_int_equal(
        renderer_parser_add(p, "ght\nplan it <chan", 17, false, &content, &thinking, calls, &e), 0);
    assert_string_equal(buf_cstr(&thinking), "plan it");
    assert_int_equal(
        renderer_parser_add(p, "nel|>ok <|tool_c", 16, false, &content, &thinking, calls, &e), 0);
    assert_string_equal(buf_cstr(&content), "Hellook");
    assert_int_equal(
        renderer_parser_add(p, "all>call:f{a:1}", 15, false, &content, &thinking, calls, &e), 0);
    assert_int_equal(json_array_size(calls), 0);
    assert_int_equal(
        renderer_parser_add(p, "<tool_call|>", 12, true, &content, &thinking, calls, &e), 0);
    assert_calls(calls, "[{'function':{'index':0,'name':'f','arguments':{'a':1}}}]");
    // A '<' that starts no marker is content once it is resolved.
    renderer_parser_free(p);
    buf_reset(&content);
    assert_int_equal(renderer_parser_new(&p, "gemma4", NULL, NULL, NULL, &e), 0);
    assert_int_equal(renderer_parser_add(p, "a <", 3, false, &content, &thinking, calls, &e), 0);
    assert_string_equal(buf_cstr(&content), "a");
    assert_int_equal(renderer_parser_add(p, "b", 1, true, &content, &thinking, calls, &e), 0);
    assert_string_equal(buf_cstr(&content), "a <b");
    renderer_parser_free(p);
    buf_deinit(&content);
    buf_deinit(&thinking);
    json_decref(calls);
}

// Thinking off, or a family without thinking: channel text is dropped.
static void test_parser_thinking_off(void **state)
{
    (void)state;
    const char *in = "<|channel>thought\nhidden<channel|>shown";
    struct parsed r;
    parse_steps(&r, "gemma4", NULL, NULL, &think_false, (const char *[]){in, NULL});
    assert_string_equal(buf_cstr(&r.content), "shown");
    assert_string_equal(buf_cstr(&r.thinking), "");
    parsed_deinit(&r);
    parse_steps(&r, "gemma4-no-thinking", NULL, NULL, &think_true, (const char *[]){in, NULL});
    assert_string_equal(buf_cstr(&r.content), "shown");
    assert_string_equal(buf_cstr(&r.thinking), "");
    parsed_deinit(&r);
    // A level is thinking on.
    parse_steps(&r, "gemma4", NULL, NULL, &think_high, (const char *[]){in, NULL});
    assert_string_equal(buf_cstr(&r.thinking), "hidden");
    parsed_deinit(&r);
    // After a tool result, output starts in the thought channel only when
    // thinking is on.
    parse_steps(&r, "gemma4", NULL, "{'role':'tool','content':'x'}", NULL,
                (const char *[]){"plain<channel|>", NULL});
    assert_string_equal(buf_cstr(&r.content), "plain<channel|>");
    parsed_deinit(&r);
}

// Calls that cannot be read, even repaired, are errors naming the parser.
static void test_parser_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *input, *tools, *msg;
    } cases[] = {
        // Raw JSON string with an invalid escape.
        {"<|tool_call>call:open_file{path:\"C:\\users\\bob\\file.txt\"}<tool_call|>", NULL,
         "gemma4: cannot parse the arguments of tool call open_file: invalid character"},
        // An unclosed string that is not the last value is not repaired.
        {"<|tool_call>call:example{first:" Q "one,second:" Q "two" Q "}<tool_call|>",
         "[" STRING_TOOL("example", STR_PROP("first") "," STR_PROP("second")) "]",
         "gemma4: cannot parse the arguments of tool call example"},
        // Without the tool's schema a raw value is not made a string.
        {"<|tool_call>call:write{content:hello<tool_call|>", NULL,
         "gemma4: cannot parse the arguments of tool call write"},
        // Nor when the schema says it is not a string.
        {"<|tool_call>call:write{content:hello<tool_call|>",
         "[{'type':'function','function':{'name':'write','parameters':{'type':'object',"
         "'properties':{'content':{'type':'number'}}}}}]",
         "gemma4: cannot parse the arguments of tool call write"},
        {"<|tool_call>get_weather{}<tool_call|>", NULL,
         "gemma4: tool call \"get_weather{}\": expected 'call:' prefix"},
        {"<|tool_call>call:get_weather<tool_call|>", NULL,
         "gemma4: tool call \"get_weather\": expected '{' in tool call"},
        // Stopped inside a call: flushed at the end, and it is incomplete.
        {"<|tool_call>call:get_wea", NULL,
         "gemma4: tool call \"get_wea\": expected '{' in tool call"},
        {"<|tool_call>call:f{a:1} trailing<tool_call|>", NULL,
         "gemma4: cannot parse the arguments of tool call f: invalid character 't' after "
         "top-level value"},
        // A bare key is quoted only when ':' follows it at once.
        {"<|tool_call>call:f{a :1}<tool_call|>", NULL,
         "gemma4: cannot parse the arguments of tool call f: invalid character 'a' looking for "
         "beginning of object key string"},
        // A missing '}' alone is not repaired.
        {"<|tool_call>call:count{n:1<tool_call|>", "[" STRING_TOOL("count", STR_PROP("name")) "]",
         "gemma4: cannot parse the arguments of tool call count: unexpected end of JSON input"},
        {"<|tool_call>call:f{a:[1,}<tool_call|>", NULL,
         "gemma4: cannot parse the arguments of tool call f"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct parsed r;
        parse_steps(&r, "gemma4", cases[i].tools, NULL, NULL,
                    (const char *[]){cases[i].input, NULL});
        if (r.rc != ERR_INVALID)
            fail_msg("case %zu: rc %d, calls %zu", i, r.rc, json_array_size(r.calls));
        if (strncmp(r.e.msg, cases[i].msg, strlen(cases[i].msg)) != 0)
            fail_msg("case %zu: %s, want %s", i, r.e.msg, cases[i].msg);
        parsed_deinit(&r);
    }
}

static void test_names(void **state)
{
    (void)state;
    assert_true(renderer_known("gemma4"));
    assert_true(renderer_known("gemma4-small"));
    assert_true(renderer_known("gemma4-large"));
    assert_true(renderer_parser_known("gemma4"));
    assert_true(renderer_parser_known("gemma4-no-thinking"));
    assert_false(renderer_known("gemma4-no-thinking"));
    assert_true(renderer_parser_tools("gemma4"));
    assert_true(renderer_parser_thinking("gemma4"));
    assert_true(renderer_parser_tools("gemma4-no-thinking"));
    assert_false(renderer_parser_thinking("gemma4-no-thinking"));
}

// TestResolveGemma4Renderer (Ollama's server/gemma4_test.go).
static void test_resolve(void **state)
{
    (void)state;
    static const struct {
        const char *renderer, *name, *type, *want;
    } cases[] = {
        {"gemma4-small", NULL, NULL, "gemma4-small"},
        {"gemma4-large", "gemma4:e2b", NULL, "gemma4-large"},
        {"gemma4", "gemma4:e4b", NULL, "gemma4-small"},
        {"gemma4", "gemma4:31b-cloud", NULL, "gemma4-large"},
        {"gemma4", "gemma-4-12b-it", NULL, "gemma4-large"},
        {"gemma4", "Gemma4:26B", "4.3B", "gemma4-large"},
        {"gemma4", "mine", "4.3B", "gemma4-small"},
        {"gemma4", "mine", "25.2B", "gemma4-large"},
        {"gemma4", "mine", "12B", "gemma4-large"},
        {"gemma4", "mine", "800M", "gemma4-small"},
        {"gemma4", "mine", "big", "gemma4-small"},
        {"gemma4", NULL, NULL, "gemma4-small"},
        {"qwen3.5", "gemma4:31b", NULL, "qwen3.5"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_string_equal(renderer_resolve(cases[i].renderer, cases[i].name, cases[i].type),
                            cases[i].want);
    assert_null(renderer_resolve(NULL, "gemma4:31b", NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_items_declarations),
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_tool_continuations),
        cmocka_unit_test(test_tool_result_names),
        cmocka_unit_test(test_declaration_details),
        cmocka_unit_test(test_images),
        cmocka_unit_test(test_parser_cases),
        cmocka_unit_test(test_parser_streaming),
        cmocka_unit_test(test_parser_partial_markers),
        cmocka_unit_test(test_parser_thinking_off),
        cmocka_unit_test(test_parser_malformed),
        cmocka_unit_test(test_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
