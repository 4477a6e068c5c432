/* libFuzzer harness of the settings parser: input "NAME=VALUE" set through
 * core_config_set (an unknown name is an error too), then rendered and set
 * again, which must give the same digest (docs/configuration.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"
#include "config/config.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static core_config_t cfg, again;
    static int ready;
    char *text, *value, rendered[CORE_TUNE_TEXT_MAX + 64];

    core_log_level = CORE_LOG_NONE; /* rejections are the common case; ARCOLL_LOG sets it */
    if (!ready) {
        if (core_config_init(&cfg) != ARCOLL_OK)
            abort();
        ready = 1;
    }
    text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    value = strchr(text, '=');
    /* A file:PATH tune value would read the file system: tests/fuzz/fuzz_tune.c reads
     * file contents from its input instead. */
    if (value != NULL && strstr(value + 1, "file:") == NULL && value[1] != '/' &&
        strncmp(value + 1, "./", 2) != 0) {
        *value++ = '\0';
        if (core_config_set(&cfg, text, value) == ARCOLL_OK) {
            again = cfg;
            if (core_config_get(&cfg, text, rendered, sizeof(rendered)) == NULL ||
                core_config_set(&again, text, rendered) != ARCOLL_OK ||
                core_config_digest(&again) != core_config_digest(&cfg))
                abort(); /* a rendered value must be accepted back unchanged */
        }
    }
    free(text);
    return 0;
}
