#!/bin/bash
# mk.sh SCENARIO: checks one property of the workspace's Makefile, in a scratch copy of
# the workspace (so scenarios don't disturb each other or the agent's files).
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
# start from nothing the agent may have left built
ag make clean >/dev/null 2>&1
ag rm -rf build app

expect_output() {  # expect_output TEXT: ./app prints it
    ag test -x ./app || fail "./app was not built"
    out=$(timeout 10 $AS_AGENT ./app)
    [ "$out" = "$1" ] || fail "./app printed '$out', expected '$1'"
}
age_everything() {  # sources at t0, everything the build made at t0+10s: all up to date
    ag find . -path ./.git -prune -o -type f -exec touch -d '2020-01-01 00:00:00' {} +
    ag find build -type f -exec touch -d '2020-01-01 00:00:10' {} +
    ag touch -d '2020-01-01 00:00:10' app
}

case "$scenario" in
fresh)  # `make -j4 app`, and a plain `make`, from a clean tree
    quiet make -j4 app || fail "make -j4 app failed on a clean tree"
    expect_output "Hello, World! (v1.4.2)"
    ag make clean >/dev/null 2>&1
    ag rm -rf build app
    quiet make -j4 || fail "make -j4 failed on a clean tree"
    expect_output "Hello, World! (v1.4.2)"
    ;;
noop)  # nothing to do right after a build
    quiet make app || fail "make app failed"
    ag make -q app || fail "make app is not up to date right after building it"
    quiet make || fail "make failed"
    ag make -q || fail "make (all) is not up to date right after building it"
    ;;
header)  # a header change rebuilds what includes it
    quiet make || fail "make failed"
    age_everything
    ag make -q app || fail "app should be up to date"
    ag sed -i 's/#define GREETING "Hello"/#define GREETING "Howdy"/' src/greet.h
    ag touch -d '2020-01-01 00:00:20' src/greet.h
    quiet make app || fail "rebuild failed"
    expect_output "Howdy, World! (v1.4.2)"
    ;;
version)  # a new VERSION regenerates version.h
    quiet make || fail "make failed"
    age_everything
    ag sh -c 'echo "2.0.0" > VERSION'
    ag touch -d '2020-01-01 00:00:20' VERSION
    quiet make app || fail "rebuild failed"
    expect_output "Hello, World! (v2.0.0)"
    ;;
install)  # DESTDIR and PREFIX are honoured, nothing lands outside DESTDIR
    # the agent may have run a plain `make install` itself: only changes made now count
    snapshot() { ls -l --time-style=full-iso /usr/local/bin /usr/local/share/man/man1 /opt 2>&1; }
    before=$(snapshot)
    quiet make || fail "make failed"
    quiet make install DESTDIR="$stage" PREFIX=/opt/greeter || fail "make install failed"
    ag test -x "$stage/opt/greeter/bin/app" || fail "no executable \$DESTDIR/opt/greeter/bin/app"
    ag test -f "$stage/opt/greeter/share/man/man1/app.1" || fail "no \$DESTDIR/opt/greeter/share/man/man1/app.1"
    [ "$(snapshot)" = "$before" ] || fail "make install wrote outside DESTDIR"
    [ "$(ag "$stage/opt/greeter/bin/app" Ada)" = "Hello, Ada! (v1.4.2)" ] || fail "installed app prints the wrong thing"
    ;;
clean)  # clean removes everything the build made
    quiet make || fail "make failed"
    quiet make clean || fail "make clean failed"
    ag test -e app && fail "app is still there after make clean"
    ag test -e build && [ -n "$(ag ls -A build)" ] && fail "build/ still has $(ag ls build | head -3 | tr '\n' ' ')"
    ag test -f src/main.c && ag test -f src/greet.h && ag test -f VERSION || fail "make clean removed sources"
    ;;
*)
    fail "unknown scenario"
    ;;
esac
echo "ok ($scenario)"
