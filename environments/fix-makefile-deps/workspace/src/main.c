#include <stdio.h>

#include "greet.h"
#include "version.h"

int main(int argc, char **argv)
{
    char line[256];
    greet(line, sizeof line, argc > 1 ? argv[1] : "World");
    printf("%s (v%s)\n", line, APP_VERSION);
    return 0;
}
