# bash completion for apnea-locks                                    -*- shell-script -*-
# Installed as <bash-completion completionsdir>/apnea-locks; works with or without the
# bash-completion package (only `complete` and `compgen` are needed).

# The lock directory Apnea uses: <tmpdir>/apnea-<uid>/operation-locks (Node's os.tmpdir()).
_apnea_locks_lock_dir()
{
    local tmp=${TMPDIR:-${TMP:-${TEMP:-/tmp}}}
    printf '%s/apnea-%s/operation-locks' "${tmp%/}" "$(id -u 2>/dev/null)"
}

# Entries of the lock area (for LOCK / LOCKPATH arguments), then ordinary paths.
_apnea_locks_entries()
{
    local cur=$1 dir word
    dir=$(_apnea_locks_lock_dir)
    local -a names=()
    if [[ $cur != */* && -d $dir && -r $dir ]]; then
        for word in "$dir"/*; do
            [[ -e $word || -L $word ]] && names+=("${word##*/}")
        done
        COMPREPLY+=($(compgen -W "${names[*]}" -- "$cur"))
    fi
    compopt -o filenames 2>/dev/null
    COMPREPLY+=($(compgen -f -- "$cur"))
}

# Completes the last item of a comma-separated list ("+a,b,c" keeps "+a,b,").
_apnea_locks_list()
{
    local cur=$1 words=$2 prefix="" head=""
    [[ $cur == +* ]] && prefix=+
    local base=${cur#+} last=${cur#+}
    if [[ $base == *,* ]]; then
        head=${base%,*},
        last=${base##*,}
    fi
    COMPREPLY=($(compgen -P "$prefix$head" -W "$words" -- "$last"))
}

_apnea_locks()
{
    local cur prev words cword
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    COMPREPLY=()

    local commands="status inspect explain path reclaim run check"
    local command="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            -*) ;;
            *) command=${words[i]}; break ;;
        esac
    done

    if [[ -z $command ]]; then
        COMPREPLY=($(compgen -W "$commands help -h --help -V --version" -- "$cur"))
        return 0
    fi
    # help COMMAND: the commands.
    if [[ $command == help ]]; then
        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        return 0
    fi

    # Every command: -h, -V, --color; every command that reads an area: --user.
    local common="-h --help -V --version --color --color="
    local timing="--tolerance --guard-age --jobs"
    local opts=""
    case $command in
        status)
            opts="-J --json -r --raw --format --output-file -o --output --output-all
                  -H --list-columns -n --noheadings -u --notruncate -p --pid --state --kind
                  --repo --only-labelled --scan --scan-depth $timing --lock-dir --user
                  --all-users" ;;
        inspect)
            opts="--repo --home -J --json $timing --lock-dir --user" ;;
        explain)
            opts="-J --json $timing --user" ;;
        path)
            opts="--repo --home -J --json --lock-dir --user" ;;
        reclaim)
            opts="--repo --home --all --force --dry-run -y --yes -J --json
                  --keep-tombstone --no-audit --not-owner $timing --user --lock-dir" ;;
        run)
            opts="--repo --home --lock-dir -w --wait --timeout -n --nonblock -E --conflict-exit-code
                  -c --command -q --quiet -J --json --print-token" ;;
        check)
            opts="-v --verbose -w --warning -c --critical -t --timeout
                  --warn-age --crit-age --prometheus --output-file --foreign --repo --scan
                  --scan-depth $timing --lock-dir --user --all-users" ;;
        *)
            return 0 ;;
    esac
    opts="$common $opts"

    # run: after "--" (or the first word that is not an option) comes a command.
    if [[ $command == run ]]; then
        for ((i = i + 1; i < cword; i++)); do
            case ${words[i]} in
                --) break ;;
                --repo|--home|--lock-dir|-w|--wait|-E|--conflict-exit-code|-c|--command) ((i++)) ;;
                -*) ;;
                *) break ;;
            esac
        done
        if ((i < cword)); then
            if declare -F _command_offset >/dev/null; then
                [[ ${words[i]} == -- ]] && ((i++))
                _command_offset "$i"
            else
                COMPREPLY=($(compgen -c -- "$cur" | sort -u))
            fi
            return 0
        fi
    fi

    case $prev in
        --repo|--home|--scan|--lock-dir)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -d -- "$cur")); return 0 ;;
        --output-file)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
        --user)
            COMPREPLY=($(compgen -u -- "$cur")); return 0 ;;
        --format)
            COMPREPLY=($(compgen -W "table raw json prometheus" -- "$cur")); return 0 ;;
        --state)
            _apnea_locks_list "${cur#+}" "live stale malformed live-malformed free in-flight debris leftover unknown"
            return 0 ;;
        --kind)
            _apnea_locks_list "${cur#+}" "repository global-setup unknown"; return 0 ;;
        -o|--output)
            _apnea_locks_list "$cur" "help kind key role state reason apnea pid token age
                command started label fix written name path attention self-heals certain
                guard proof proof-name decision why next-step force clock-void lock-name
                suffix type mtime"
            return 0 ;;
        --tolerance|--guard-age|--jobs|--warn-age|--crit-age|--scan-depth|-w|--wait|--warning|-c|--critical|-t|--timeout|-p|--pid|-E|--conflict-exit-code|--command)
            return 0 ;;
    esac

    if [[ $cur == --color=* ]]; then
        COMPREPLY=($(compgen -P "--color=" -W "auto always never" -- "${cur#--color=}"))
        return 0
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        [[ ${#COMPREPLY[@]} == 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
        return 0
    fi
    case $command in
        status|inspect|reclaim|explain) _apnea_locks_entries "$cur" ;;
        run) COMPREPLY=($(compgen -c -- "$cur" | sort -u)) ;;
    esac
    return 0
} &&
complete -F _apnea_locks apnea-locks

# ex: filetype=sh
