// What the page calls besides main: the Stop button. It is the CLI's own stop request (the SIGTERM handler
// of tools/train.cpp sets the flag the trainer checks between steps), so a stopped page run ends exactly as a
// stopped native run: the step under way finishes, the checkpoint is written, main returns 143.
#include <emscripten.h>

#include <csignal>

extern "C" EMSCRIPTEN_KEEPALIVE void et_request_stop() { std::raise(SIGTERM); }
