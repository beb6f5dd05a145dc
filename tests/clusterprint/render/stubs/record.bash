# Sourced by the stubs (not a command): what the scripts ask of a stub is kept whole.
# record NAME ARGS...: appends "NAME ARGS" to $FAKE/calls, and keeps in a folder of
# $FAKE/record the call's arguments (argv, NUL-separated), what it read on stdin (stdin) and
# every file an argument names, as FILE, --flag=FILE, key=FILE or @FILE (file-N). A call
# that contains a line of $FAKE/broken then fails, as a step that fails for good.
record() {
  local call="$*" dir arg path n=0 part
  local -A copied
  echo "$call" >>"$FAKE/calls"
  mkdir -p "$FAKE/record"
  dir=$(mktemp -d "$FAKE/record/$1.XXXXXX")
  printf '%s\0' "$@" >"$dir/argv"
  if [[ ! -t 0 ]]; then
    cat >"$dir/stdin"
  fi
  for arg; do
    copied=()
    for path in "$arg" "${arg#*=}" "${arg#@}"; do
      if [[ -f $path && -z ${copied[$path]:-} ]]; then
        copied[$path]=1
        n=$((n + 1))
        cp "$path" "$dir/file-$n"
      fi
    done
  done
  [[ -f $FAKE/broken ]] || return 0
  while IFS= read -r part; do
    if [[ -n $part && $call == *"$part"* ]]; then
      echo "$1: broken by the test ($part)" >&2
      exit 1
    fi
  done <"$FAKE/broken"
}

# installs NAME ARGS...: this call installs a package or downloads (apt-get, dpkg -i, pip
# install, curl of anything but the metadata server, git, docker pull and run): listed in
# $FAKE/installs; where the VM may do neither ($FAKE/no-installs, Node.forbid_installs) it
# fails, as it would on a VM without the internet, and is listed in $FAKE/refused too.
installs() {
  echo "$*" >>"$FAKE/installs"
  [[ -e $FAKE/no-installs ]] || return 0
  echo "$*" >>"$FAKE/refused"
  echo "$1: refused: this VM installs and downloads nothing" >&2
  exit 1
}
