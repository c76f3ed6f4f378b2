#!/usr/bin/env bash
# bench/orm.sh: run test suites of real MySQL clients that this project did not
# write against Strata and MariaDB side by side, and print their counts.
#
# Usage: bench/orm.sh [SUITE...]     (default: pymysql django)
#
# Suites, each installed from PyPI into a virtualenv under WORK_DIR:
#   pymysql  PyMySQL 0.10.1's own test suite (pymysql/tests, shipped in its sdist:
#            the last release that ships it), run with pytest. Its config is
#            pymysql/tests/databases.json: two databases, test1 and test2.
#   django   Django's test suite (tests/ of the Django sdist), run by its
#            runtests.py with the MySQL backend over PyMySQL (install_as_MySQLdb)
#            for the apps in DJANGO_APPS.
#
# Settings (environment): WORK_DIR=<mktemp -d> KEEP_WORK=0 STRATA_BIN (default:
#   build cmd/strata) STRATA_PORT=4310 STRATA_HTTP_PORT=8310 STRATA_GRPC_PORT=20310
#   MARIADB_PORT=3316 SERVERS="strata mariadb" PYMYSQL_VERSION=0.10.1
#   DJANGO_VERSION=5.2.19 DJANGO_APPS="basic lookup ..." (see below) DJANGO_PARALLEL=1
#
# Output: per suite and server a line "suite server: N passed, N failed, N errors,
# N skipped", and the suites' own logs under WORK_DIR/<suite>-<server>.log (kept
# when KEEP_WORK=1). Not part of CI: a full run takes tens of minutes.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

SUITES=("$@")
((${#SUITES[@]})) || SUITES=(pymysql django)
SERVERS=${SERVERS:-"strata mariadb"}
STRATA_PORT=${STRATA_PORT:-4310}
STRATA_HTTP_PORT=${STRATA_HTTP_PORT:-8310}
STRATA_GRPC_PORT=${STRATA_GRPC_PORT:-20310}
MARIADB_PORT=${MARIADB_PORT:-3316}
PYMYSQL_VERSION=${PYMYSQL_VERSION:-0.10.1}
DJANGO_VERSION=${DJANGO_VERSION:-5.2.19}
DJANGO_PARALLEL=${DJANGO_PARALLEL:-1}
# Apps of Django's suite that exercise the database layer an application uses:
# models, queries, lookups, aggregation, expressions, transactions, schema
# introspection and migrations.
DJANGO_APPS=${DJANGO_APPS:-"basic lookup queries aggregation annotations expressions \
ordering update delete get_or_create bulk_create select_related many_to_one \
many_to_many one_to_one model_fields db_functions datetimes dates transactions \
custom_lookups introspection schema"}
KEEP_WORK=${KEEP_WORK:-0}
OWN_WORK_DIR=0
if [[ -z ${WORK_DIR:-} ]]; then
	WORK_DIR=$(mktemp -d -t strata-orm.XXXXXX)
	OWN_WORK_DIR=1
fi
STRATA_PID=
MARIADB_PID=

cleanup() {
	local rc=$?
	[[ -n $STRATA_PID ]] && stop_pid "$STRATA_PID" 30
	[[ -n $MARIADB_PID ]] && stop_pid "$MARIADB_PID" 30
	if ((OWN_WORK_DIR)) && [[ $KEEP_WORK != 1 ]]; then
		rm -rf "$WORK_DIR"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_debian_packages mariadbd mariadb -- mariadb-server mariadb-client
ensure_debian_packages python3 -- python3 python3-venv

# --- install the suites -----------------------------------------------------
VENV=$WORK_DIR/venv
if [[ ! -x $VENV/bin/python ]]; then
	log "creating a virtualenv in $VENV"
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q --upgrade pip >/dev/null
fi
PY=$VENV/bin/python
PIP=$VENV/bin/pip

install_pymysql() {
	local dir=$WORK_DIR/src
	[[ -d $dir/PyMySQL-$PYMYSQL_VERSION ]] && return 0
	mkdir -p "$dir"
	log "downloading PyMySQL $PYMYSQL_VERSION (sdist, with its tests)"
	"$PIP" download -q --no-deps --no-binary :all: -d "$dir" "PyMySQL==$PYMYSQL_VERSION"
	tar -xzf "$dir/PyMySQL-$PYMYSQL_VERSION.tar.gz" -C "$dir"
	"$PIP" install -q pytest
}

install_django() {
	local dir=$WORK_DIR/src
	[[ -d $dir/django-$DJANGO_VERSION ]] && return 0
	mkdir -p "$dir"
	log "downloading Django $DJANGO_VERSION (sdist, with its tests)"
	"$PIP" download -q --no-deps --no-binary :all: -d "$dir" "Django==$DJANGO_VERSION"
	tar -xzf "$dir"/[dD]jango-"$DJANGO_VERSION".tar.gz -C "$dir"
	[[ -d $dir/django-$DJANGO_VERSION ]] || mv "$dir/Django-$DJANGO_VERSION" "$dir/django-$DJANGO_VERSION"
	# Django itself, its test requirements that matter for these apps, and
	# PyMySQL as the MySQLdb module (Django's backend wants mysqlclient, a C
	# extension; PyMySQL is what a pure-Python application uses instead).
	"$PIP" install -q -e "$dir/django-$DJANGO_VERSION" "PyMySQL==1.1.2" tblib
}

# --- servers -----------------------------------------------------------------
start_server() {
	case $1 in
	strata)
		local bin=${STRATA_BIN:-}
		if [[ -z $bin ]]; then
			log "building strata"
			(cd "$REPO_ROOT" && go build -o "$WORK_DIR/strata" ./cmd/strata)
			bin=$WORK_DIR/strata
		fi
		rm -rf "$WORK_DIR/strata-data"
		start_strata "$bin" "$WORK_DIR/strata-data" "$STRATA_PORT" "$STRATA_HTTP_PORT" "$STRATA_GRPC_PORT"
		PORT=$STRATA_PORT
		;;
	mariadb)
		rm -rf "$WORK_DIR/mariadb"
		start_mariadb "$WORK_DIR/mariadb" "$MARIADB_PORT" 256M
		PORT=$MARIADB_PORT
		;;
	esac
}

stop_server() {
	case $1 in
	strata) stop_pid "$STRATA_PID" 30 && STRATA_PID= ;;
	mariadb) stop_pid "$MARIADB_PID" 30 && MARIADB_PID= ;;
	esac
}

sql() { mariadb --protocol=tcp -h 127.0.0.1 -P "$PORT" -u root -e "$1"; }

# counts <junit xml>: "N passed, N failed, N errors, N skipped"
counts() {
	"$PY" - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
t = f = e = s = 0
for su in suites:
    t += int(su.get("tests", 0)); f += int(su.get("failures", 0))
    e += int(su.get("errors", 0)); s += int(su.get("skipped", 0))
print(f"{t - f - e - s} passed, {f} failed, {e} errors, {s} skipped")
EOF
}

# --- suites -------------------------------------------------------------------
run_pymysql() {
	local server=$1 dir=$WORK_DIR/src/PyMySQL-$PYMYSQL_VERSION
	sql "DROP DATABASE IF EXISTS test1; DROP DATABASE IF EXISTS test2; CREATE DATABASE test1 DEFAULT CHARACTER SET utf8mb4; CREATE DATABASE test2 DEFAULT CHARACTER SET utf8mb4;"
	cat >"$dir/pymysql/tests/databases.json" <<EOF
[{"host": "127.0.0.1", "port": $PORT, "user": "root", "passwd": "", "db": "test1", "use_unicode": true, "local_infile": true},
 {"host": "127.0.0.1", "port": $PORT, "user": "root", "passwd": "", "db": "test2"}]
EOF
	(cd "$dir" && timeout 1800 "$PY" -m pytest -q -p no:cacheprovider pymysql/tests \
		--junitxml="$WORK_DIR/pymysql-$server.xml" >"$WORK_DIR/pymysql-$server.log" 2>&1) || true
	echo "pymysql $server: $(counts "$WORK_DIR/pymysql-$server.xml")"
}

run_django() {
	local server=$1 dir=$WORK_DIR/src/django-$DJANGO_VERSION/tests
	cat >"$dir/test_strata_mysql.py" <<EOF
import pymysql
pymysql.version_info = (2, 2, 1, "final", 0)
pymysql.install_as_MySQLdb()
DATABASES = {
    "default": {"ENGINE": "django.db.backends.mysql", "HOST": "127.0.0.1", "PORT": $PORT,
                "USER": "root", "PASSWORD": "", "NAME": "django_default",
                "TEST": {"NAME": "test_django_default", "CHARSET": "utf8mb4"}},
    "other": {"ENGINE": "django.db.backends.mysql", "HOST": "127.0.0.1", "PORT": $PORT,
              "USER": "root", "PASSWORD": "", "NAME": "django_other",
              "TEST": {"NAME": "test_django_other", "CHARSET": "utf8mb4"}},
}
SECRET_KEY = "django_tests_secret_key"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = False
EOF
	# shellcheck disable=SC2086
	(cd "$dir" && timeout 3600 "$PY" runtests.py --settings=test_strata_mysql --noinput \
		--parallel "$DJANGO_PARALLEL" -v 2 $DJANGO_APPS >"$WORK_DIR/django-$server.log" 2>&1) || true
	"$PY" - "$WORK_DIR/django-$server.log" <<'EOF'
import re, sys
text = open(sys.argv[1], errors="replace").read()
ran = re.findall(r"^Ran (\d+) tests?", text, re.M)
tail = re.findall(r"^(OK|FAILED)(?: \((.*)\))?$", text, re.M)
n = int(ran[-1]) if ran else 0
f = e = s = xf = 0
if tail:
    for part in (tail[-1][1] or "").split(", "):
        if "=" in part:
            k, v = part.split("=")
            v = int(v)
            if k == "failures": f = v
            elif k == "errors": e = v
            elif k == "skipped": s = v
            elif k == "expected failures": xf = v
print(f"django {sys.argv[1].rsplit('-', 1)[-1][:-4]}: {n - f - e - s} passed, {f} failed, {e} errors, {s} skipped" + ("" if ran else " (the run did not finish: see its log)"))
EOF
}

for suite in "${SUITES[@]}"; do
	case $suite in
	pymysql) install_pymysql ;;
	django) install_django ;;
	*)
		log "unknown suite $suite"
		exit 2
		;;
	esac
done

for server in $SERVERS; do
	start_server "$server"
	for suite in "${SUITES[@]}"; do
		log "running $suite against $server"
		"run_$suite" "$server"
	done
	stop_server "$server"
done
log "logs in $WORK_DIR"
