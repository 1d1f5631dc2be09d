#!/bin/bash
# mk.sh SCENARIO: checks one property of the workspace's Makefile, in a scratch copy of
# the workspace (so scenarios don't disturb each other or the agent's files).
# Every scenario first requires a real build: ./app an ELF program and build/main.o and
# build/greet.o ELF objects (the layout the README gives), so a Makefile that writes a
# script printing the right text, or that does nothing, earns nothing anywhere. No property
# is checked where it would hold vacuously: `clean` is judged on artefacts that existed,
# "up to date" next to "out of date once a source changes".
# The agent's Makefile runs in that copy, as the agent's user, while this script runs as
# root: it can put links there at any moment. So root touches nothing in the copy: every
# file operation there runs as the agent's user (`ag`), the copy and the install stage sit
# in a folder of root's (never renamed or replaced), and the logs root reads back are in a
# folder only root can reach.
set -u
scenario=$1
logs=$(mktemp -d)  # root's, 0700
base=$(mktemp -d)
chmod 0711 "$base"
work=$base/work
stage=$base/stage
mkdir "$work" "$stage"
chown "$AGENT_USER" "$work" "$stage"  # the agent's Makefile runs as the agent's user
cd "$work" || exit 1
ag() { $AS_AGENT "$@"; }
fail() { echo "FAIL ($scenario): $*"; exit 1; }
quiet() { ag "$@" >"$logs/log" 2>&1 || { tail -15 "$logs/log"; return 1; }; }
ag cp -a /workspace/. . 2>/dev/null  # what the agent's user cannot read does not come
from_scratch() {  # nothing the agent (or an earlier step) left built
    ag make clean >/dev/null 2>&1
    ag rm -rf build app
}

is_elf() {  # is_elf FILE obj|exe: FILE, read as the agent, is an ELF object / program
    local head
    head=$(ag od -An -tx1 -N18 "$1" 2>/dev/null | tr -d ' \n')
    [ "${head:0:8}" = 7f454c46 ] || return 1
    case "$2" in  # e_type (little-endian, at byte 16): 1 relocatable, 2 executable, 3 PIE
    obj) [ "${head:32:4}" = 0100 ] ;;
    exe) [ "${head:32:4}" = 0200 ] || [ "${head:32:4}" = 0300 ] ;;
    esac
}
real_build() {  # what make made is a program linked from objects compiled from src/
    ag test -f app -a ! -L app || fail "./app was not built"
    is_elf app exe || fail "./app is not a compiled program (not an ELF executable)"
    for o in build/main.o build/greet.o; do
        is_elf "$o" obj || fail "$o is not an object file compiled from src/"
    done
}
expect_output() {  # expect_output TEXT: ./app prints it
    local out
    out=$(timeout 10 $AS_AGENT ./app)
    [ "$out" = "$1" ] || fail "./app printed '$out', expected '$1'"
}
age_everything() {  # sources at t0, everything the build made at t0+10s: all up to date
    ag find . -path ./.git -prune -o -type f -exec touch -d '2020-01-01 00:00:00' {} +
    ag find build -type f -exec touch -d '2020-01-01 00:00:10' {} +
    ag touch -d '2020-01-01 00:00:10' app
}
edit() {  # edit FILE SED-SCRIPT: change a source of the scratch copy, dated after the build
    ag sed -i "$2" "$1" && ag grep -q . "$1" || fail "could not edit $1"
    ag touch -d '2020-01-01 00:00:20' "$1"
}

from_scratch
case "$scenario" in
fresh)  # `make -j4 app`, and a plain `make`, from a clean tree, from the sources as they are
    quiet make -j4 app || fail "make -j4 app failed on a clean tree"
    real_build
    expect_output "Hello, World! (v1.4.2)"
    from_scratch
    # the program must come from the C sources: a changed source changes what it prints
    edit src/greet.c 's/"%s, %s!"/"%s; %s!"/'
    quiet make -j4 || fail "make -j4 failed on a clean tree"
    real_build
    expect_output "Hello; World! (v1.4.2)"
    ;;
noop)  # nothing to do right after a build; something to do once a .c file changes
    quiet make app || fail "make app failed"
    real_build
    ag make -q app || fail "make app is not up to date right after building it"
    quiet make || fail "make failed"
    ag make -q || fail "make (all) is not up to date right after building it"
    age_everything
    ag make -q app || fail "app should be up to date"
    edit src/greet.c 's/"%s, %s!"/"%s; %s!"/'
    ag make -q app && fail "make app has nothing to do after src/greet.c changed (app has no prerequisites?)"
    quiet make app || fail "rebuild failed"
    real_build
    expect_output "Hello; World! (v1.4.2)"
    ;;
header)  # a header change rebuilds what includes it
    quiet make || fail "make failed"
    real_build
    age_everything
    ag make -q app || fail "app should be up to date"
    edit src/greet.h 's/#define GREETING "Hello"/#define GREETING "Howdy"/'
    quiet make app || fail "rebuild failed"
    real_build
    expect_output "Howdy, World! (v1.4.2)"
    ;;
version)  # a new VERSION regenerates version.h
    quiet make || fail "make failed"
    real_build
    age_everything
    edit VERSION 's/^1\.4\.2$/2.0.0/'
    quiet make app || fail "rebuild failed"
    real_build
    expect_output "Hello, World! (v2.0.0)"
    ;;
install)  # DESTDIR and PREFIX are honoured, nothing lands outside DESTDIR
    # the agent may have run a plain `make install` itself: only changes made now count
    snapshot() { ls -l --time-style=full-iso /usr/local/bin /usr/local/share/man/man1 /opt 2>&1; }
    before=$(snapshot)
    quiet make || fail "make failed"
    real_build
    quiet make install DESTDIR="$stage" PREFIX=/opt/greeter || fail "make install failed"
    ag test -x "$stage/opt/greeter/bin/app" || fail "no executable \$DESTDIR/opt/greeter/bin/app"
    is_elf "$stage/opt/greeter/bin/app" exe || fail "the installed app is not the compiled program"
    ag test -f "$stage/opt/greeter/share/man/man1/app.1" || fail "no \$DESTDIR/opt/greeter/share/man/man1/app.1"
    [ "$(snapshot)" = "$before" ] || fail "make install wrote outside DESTDIR"
    [ "$(timeout 10 $AS_AGENT "$stage/opt/greeter/bin/app" Ada)" = "Hello, Ada! (v1.4.2)" ] ||
        fail "installed app prints the wrong thing"
    ;;
clean)  # clean removes everything the build made (and the build made something)
    quiet make || fail "make failed"
    real_build
    ag test -f build/version.h || fail "make did not generate build/version.h"
    quiet make clean || fail "make clean failed"
    ag test -e app && fail "app is still there after make clean"
    left=$(ag find build -mindepth 1 -maxdepth 1 2>/dev/null | head -3 | tr '\n' ' ')
    [ -z "$left" ] || fail "build/ still has $left"
    ag test -f src/main.c -a -f src/greet.c -a -f src/greet.h -a -f VERSION ||
        fail "make clean removed sources"
    ;;
*)
    fail "unknown scenario"
    ;;
esac
echo "ok ($scenario)"
