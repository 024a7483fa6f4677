# Shared by instructions.sh, cpu_per_query.sh and compare.sh (sourced): one server of a
# comparison on the bench.test. zone in $DATA, listening on 127.0.0.1:$PORT.
#
#   start_server NAME BINARY DIR [PREFIX...]   starts it under PREFIX (taskset, valgrind, ...),
#                                              waits until it answers, sets PID
#   stop_server DIR                            SIGTERM, then waits for it (and NSD's children)
#
# NAME nsd runs NSD with conf/nsd.conf; NAME reflector runs bench/reflector.c's binary; any
# other NAME is a meshdns binary, given the extra arguments in $ARGS_<NAME> (each character of
# NAME that is not a letter, digit or _ read as _; @DIR@ there is DIR, so a --data-dir in it
# starts empty every run, as DIR does), for example
#   ARGS_rrl="--rrl-rate 1000000" bench/instructions.sh head=target/release/meshdns rrl=target/release/meshdns

start_server() {
  local name=$1 bin=$2 dir=$3
  shift 3
  local var="ARGS_${name//[^A-Za-z0-9_]/_}"
  local extra=${!var:-}
  extra=${extra//@DIR@/$dir}
  mkdir -p "$dir"
  case $name in
    nsd)
      sed -e "s#@DATA@#$DATA#g" -e "s#@RUN@#$dir#g" -e "s#@5301#@$PORT#" "$HERE/conf/nsd.conf" > "$dir/nsd.conf"
      "$@" nsd -d -c "$dir/nsd.conf" > "$dir/out.log" 2>&1 &
      ;;
    reflector)
      "$@" "$bin" "$PORT" > "$dir/out.log" 2>&1 &
      ;;
    *)
      # shellcheck disable=SC2086 # the extra arguments are split on purpose
      "$@" "$bin" serve --zone-file "bench.test.=$DATA/bench.test.zone" --listen "127.0.0.1:$PORT" \
        --udp-sockets 1 --workers 1 --log-level warn $extra > "$dir/out.log" 2>&1 &
      ;;
  esac
  PID=$!
  for _ in $(seq 600); do
    kill -0 "$PID" 2> /dev/null || { echo "$name did not start: $dir/out.log" >&2; return 1; }
    if [ "$name" = reflector ]; then
      # The reflector answers with the question echoed: any reply will do.
      dig @127.0.0.1 -p "$PORT" +tries=1 +time=1 bench.test. SOA 2> /dev/null | grep -q 'status: NOERROR' && return 0
    else
      # The mix's first query answered with data: the zone file is loaded. (dig prints its
      # errors, "connection refused" included, on stdout too: only a line that is not a
      # comment is an answer.)
      # shellcheck disable=SC2046 # NAME TYPE
      dig @127.0.0.1 -p "$PORT" +short +tries=1 +time=1 $(head -n 1 "$DATA/queries.txt") 2> /dev/null | grep -q '^[^;]' && return 0
    fi
    sleep 0.2
  done
  echo "$name did not answer within 2 minutes: $dir/out.log" >&2
  return 1
}

stop_server() {
  kill -TERM "$PID" 2> /dev/null || true
  wait "$PID" 2> /dev/null || true
  # NSD's children may outlive the main process for a moment.
  for _ in $(seq 100); do pgrep -f "$1/nsd.conf" > /dev/null || break; sleep 0.1; done
}
