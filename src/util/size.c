/* core_config_parse_size (util/size.h), alone in its object: the heap's
 * preload library (src/preload) links it without the rest of the settings. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/size.h"

int core_config_parse_size(const char *s, size_t *out)
{
    unsigned long long v, mult = 1;
    char *end;

    if (s == NULL || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    switch (tolower((unsigned char)*end)) {
    case '\0': break;
    case 'k':
        mult = 1ULL << 10;
        end++;
        break;
    case 'm':
        mult = 1ULL << 20;
        end++;
        break;
    case 'g':
        mult = 1ULL << 30;
        end++;
        break;
    default: return -1;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || v > (unsigned long long)SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}
