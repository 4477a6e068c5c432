/* Entry points for layers that embed arcoll: run-time version, call sites. */
#include "api/embed.h"
#include "arcoll.h"

_Thread_local const void *core_call_site;

unsigned arcoll_version(const char **string)
{
    if (string != NULL)
        *string = ARCOLL_VERSION_STRING;
    return ARCOLL_VERSION;
}

void arcoll_call_site(const void *site)
{
    core_call_site = site;
}
