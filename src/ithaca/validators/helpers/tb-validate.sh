# Verdict helper for Ithaca validator cells written in shell (POSIX sh and awk):
#   . "$ITHACA_RUN_DIR/tb-validate.sh"
#   tb_pass "clean run"            or   tb_fail "3 errors" '{"errors": 3}'
# The reason is JSON-escaped; the evidence, when given, must already be JSON and is
# written verbatim. A run has one verdict: a second call, a missing reason or evidence
# that is not JSON makes the call fail (status 2) without writing, and the helper never
# exits the shell. The verdict file appears whole (written aside, then linked into
# place) and is never overwritten.

tb_pass() { _tb_verdict pass "$@"; }
tb_fail() { _tb_verdict fail "$@"; }

_tb_verdict() {
  if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
    echo "tb_$1: usage: tb_$1 REASON [EVIDENCE_JSON]" >&2
    return 2
  fi
  if [ -n "${_tb_written:-}" ] || [ -e "$TB_VERDICT_PATH" ]; then
    echo "tb_$1: a verdict was already written in this run" >&2
    return 2
  fi
  _tb_record=$(TB_KIND="$1" TB_REASON="$2" TB_EVIDENCE="${3-}" TB_HAS_EVIDENCE="$(($# - 2))" \
    awk "$_tb_awk_record" </dev/null) || {
    printf 'tb_%s: evidence is not JSON: %s\n' "$1" "${3-}" >&2  # echo would expand \ escapes
    return 2
  }
  _tb_temp="$TB_VERDICT_PATH.$$.tmp"
  (set -C && printf '%s' "$_tb_record" >"$_tb_temp") || return 2
  if ln "$_tb_temp" "$TB_VERDICT_PATH" 2>/dev/null; then
    rm -f "$_tb_temp"
    _tb_written=1
    return 0
  fi
  rm -f "$_tb_temp"
  echo "tb_$1: a verdict was already written in this run" >&2
  return 2
}

# Prints the verdict record; exits 1 when the evidence is not JSON.
_tb_awk_record='
function fail_json() { ok = 0; return 0 }
function skip_space() { while (pos <= n && index(" \t\n\r", substr(s, pos, 1)) > 0) pos++ }
function json_value(   c) {
  skip_space()
  c = substr(s, pos, 1)
  if (c == "{") return json_object()
  if (c == "[") return json_array()
  if (c == "\"") return json_string()
  if (c == "-" || (c >= "0" && c <= "9")) return json_number()
  return json_word("true") || json_word("false") || json_word("null") || fail_json()
}
function json_word(word) {
  if (substr(s, pos, length(word)) != word) return 0
  pos += length(word)
  return 1
}
function json_object(   c) {
  pos++
  skip_space()
  if (substr(s, pos, 1) == "}") { pos++; return 1 }
  while (1) {
    skip_space()
    if (substr(s, pos, 1) != "\"" || !json_string()) return fail_json()
    skip_space()
    if (substr(s, pos, 1) != ":") return fail_json()
    pos++
    if (!json_value()) return 0
    skip_space()
    c = substr(s, pos++, 1)
    if (c == "}") return 1
    if (c != ",") return fail_json()
  }
}
function json_array(   c) {
  pos++
  skip_space()
  if (substr(s, pos, 1) == "]") { pos++; return 1 }
  while (1) {
    if (!json_value()) return 0
    skip_space()
    c = substr(s, pos++, 1)
    if (c == "]") return 1
    if (c != ",") return fail_json()
  }
}
function json_string(   c) {
  pos++
  while (pos <= n) {
    c = substr(s, pos, 1)
    if (c == "\"") { pos++; return 1 }
    if (c in control) return fail_json()
    if (c == "\\") {
      c = substr(s, pos + 1, 1)
      if (c == "u") {
        if (substr(s, pos + 2, 4) !~ /^[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]$/) return fail_json()
        pos += 6
      } else if (c != "" && index("\"\\/bfnrt", c) > 0) {
        pos += 2
      } else return fail_json()
    } else pos++
  }
  return fail_json()
}
function json_number(   start) {
  start = pos
  while (pos <= n && index("+-.eE0123456789", substr(s, pos, 1)) > 0) pos++
  if (substr(s, start, pos - start) !~ /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) return fail_json()
  return 1
}
function escaped(text,   out, i, c) {
  out = ""
  for (i = 1; i <= length(text); i++) {
    c = substr(text, i, 1)
    if (c == "\\" || c == "\"") out = out "\\" c
    else if (c in control) out = out control[c]
    else out = out c
  }
  return out
}
BEGIN {
  for (i = 1; i < 32; i++) control[sprintf("%c", i)] = sprintf("\\u%04x", i)
  record = "{\"verdict\":\"" ENVIRON["TB_KIND"] "\",\"reason\":\"" escaped(ENVIRON["TB_REASON"]) "\""
  if (ENVIRON["TB_HAS_EVIDENCE"] == "1") {
    s = ENVIRON["TB_EVIDENCE"]; n = length(s); pos = 1; ok = 1
    if (!json_value() || !ok) exit 1
    skip_space()
    if (pos <= n) exit 1
    record = record ",\"evidence\":" s
  }
  printf "%s}", record
}
'
