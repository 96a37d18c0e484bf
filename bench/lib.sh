# What the bench scripts share; each sources it after `cd` to the checkout:
#   . bench/lib.sh
# field NAME: the value of NAME in the JSON object on stdin (a bench program's one line).
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# median X...: the middle of the values (of an even count, the lower of the two middles).
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
