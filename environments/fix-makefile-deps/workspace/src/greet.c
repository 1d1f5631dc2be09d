#include <stdio.h>

#include "greet.h"

void greet(char *buf, unsigned long size, const char *name)
{
    snprintf(buf, size, "%s, %s!", GREETING, name);
}
