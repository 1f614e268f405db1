// libFuzzer target for the server's HTTP policy parsers: Host header values
// (allowed hosts, loopback addresses) and Origin values against the default
// origin list. Invariants: a loopback address is always an allowed host, and
// an origin equal to "http://" + an allowed default host is allowed.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct env_config cfg;
    static int loaded;
    if (!loaded) {
        unsetenv("OLLAMA_ORIGINS");
        env_config_load(&cfg);
        loaded = 1;
    }
    char *s = xstrndup((const char *)data, size);  // stops at the first NUL
    bool allowed = srv_host_allowed(s);
    if (srv_addr_is_loopback(s) && !allowed)
        abort();
    srv_origin_allowed(cfg.origins, s);
    srv_same_origin(s, s);
    free(s);
    return 0;
}
