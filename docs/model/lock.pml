/*
 * One Apnea lock name, model-checked (issues 17 and 31). See docs/model/README.md.
 *
 * Actors: Apnea processes (flavour REF: Apnea 0.2.2's operation-lock.ts; RUN: apnea-locks
 * `run`, i.e. src/lock.cc acquire/release), a writer of malformed records (FOREIGN),
 * apnea-locks `reclaim` with or without --force (src/cli/reclaim.cc -> src/removal.cc,
 * decisions of src/policy.cc), a clock, a killer that crashes any actor at any step, a pauser
 * that stops a guard holder between two of its steps, a human with rm -r (DISPLACE), and,
 * once every actor has finished, a final `reclaim --force` sweep that must leave the area
 * empty. The filesystem as it is: the guard's inode number is reused at once (GUARD_REUSE),
 * an entry is removed by unlinking owner.json, then rmdir (SPLIT_RM). Safety properties
 * P1-P6 (and the boundary P3R) are assertions; liveness L1, L2 (LIVE) are never claims.
 *
 * Every switch is a -D define (spin -DNAME=VALUE, or `scripts/dev model`); the defaults are
 * the main configuration. Quotes of PROTOCOL.md are marked "PROTOCOL sN:".
 */

/* ---------------------------------------------------------------- configuration */
#ifndef NA            /* acquiring processes (Apnea, run, other writer): 1..3 */
#define NA 2
#endif
#ifndef NR            /* concurrent reclaim processes: 0..2 */
#define NR 1
#endif
#ifndef FLAV0         /* flavour of acquirer 0, 1, 2: REF, RUN or FOREIGN */
#define FLAV0 REF
#endif
#ifndef FLAV1
#define FLAV1 RUN
#endif
#ifndef FLAV2
#define FLAV2 REF
#endif
#ifndef ATT           /* PROTOCOL s4.2: "Up to 3 attempts" */
#define ATT 3
#endif
#ifndef RSTEPS        /* entries each reclaim process removes at most */
#define RSTEPS 2
#endif
#ifndef RSTEPS2       /* the same for the second reclaim process */
#define RSTEPS2 RSTEPS
#endif
#ifndef FORCE         /* the reclaim processes run with --force */
#define FORCE 0
#endif
#ifndef PAUSE         /* 0: nobody pauses; 1: a guard holder may stop between two steps and
                         is resumed only while its guard is younger than the guard age (a
                         longer stop ends only by death); 2: resumed at any time */
#define PAUSE 1
#endif
#ifndef PAUSE_WRITE   /* a writer may also stop between mkdir(candidate) and owner.json */
#define PAUSE_WRITE 0
#endif
#ifndef MAXPAUSE      /* pauses in one run */
#define MAXPAUSE 1
#endif
#ifndef STEPS         /* steps of the wall clock, a sum of: 1 small forward (up to 60 s: not
                         detected, they fake clock evidence); 2 big forward (past the guard
                         age), detected (clock evidence is void while btime and /dev's birth
                         differ by more than 60 s); 4 big, undetected (a suspend and resume:
                         btime does not move); 8 (CLOCK_READINGS only) small backward (up to
                         60 s: not detected) */
#define STEPS 0
#endif
#ifndef MAXSTEP       /* clock steps in one run */
#define MAXSTEP 1
#endif
#ifndef TICKS         /* real time passes (0: only in scenarios whose INIT entries are old) */
#define TICKS 1
#endif
#ifndef MAXKILL       /* crashes in one run */
#define MAXKILL 2
#endif
#ifndef INIT          /* the area at the start: 0 empty; 1 a dead owner's lock past the grace;
                         2 that lock and a leftover guard whose holder is dead */
#define INIT 0
#endif
#ifndef DISPLACE      /* a human removes the lock by hand once, whoever owns it (runbook's
                         "Remove this lock directory manually"); P1/P2 are not checked */
#define DISPLACE 0
#endif
#ifndef CHECK_OWNERLESS /* also flag the removal of a pid-less entry whose writer is alive;
                           off where writers may be stopped before owner.json (PAUSE_WRITE):
                           that removal is --force's trust, boundary-ownerless */
#define CHECK_OWNERLESS (!PAUSE_WRITE)
#endif
#ifndef CHECK_RENAME  /* P3R: also flag a release that renames a lock not its own (the
                         boundary after a human rm -r; P3 proper is about deleting it) */
#define CHECK_RENAME 0
#endif
#ifndef GUARD_REUSE   /* 1: every guard mkdir gets the same inode number (ext4 hands a freed
                         number back at once) and the same-object test cannot tell two guards
                         apart; 0: a fresh number each time */
#define GUARD_REUSE 1
#endif
#ifndef SPLIT_RM      /* 1: removing an entry is two steps, unlink owner.json, then rmdir */
#define SPLIT_RM 1
#endif
#ifndef ONLY_P1       /* check mutual exclusion only (to show a mutant's consequence) */
#define ONLY_P1 0
#endif
#ifndef FAKE_EVIDENCE /* an undetected forward step fakes clock evidence (0: the wall-clock
                         trust boundary-clock-step shows is kept) */
#define FAKE_EVIDENCE 1
#endif
#ifndef CLOCK_READINGS /* the wall clock as readings (units of 30 s): its offset since boot
                           (btime - /dev's birth: `woff`) and the guard's ctime reading
                           (`gwoff`), for decide_guard's paused-holder filter (a paused process
                           counts only if it started no later than 60 s after the guard's
                           ctime; every one when the clock is void) and its rule that no age
                           counts while the clock is void. Only --force removes a guard, so
                           by default only --force configurations track them; 0: every paused
                           process counts, whatever the clock (the first model) */
#define CLOCK_READINGS FORCE
#endif
#ifndef RUN_SPLIT     /* 1: `run` (the pid in the record) and its command (which does the
                         work the lock protects) are two processes: a SIGKILL of `run` leaves
                         the command running until the shim (PR_SET_PDEATHSIG) has killed its
                         session, an asynchronous step; 0: both die at once (the trust that
                         the shim's kill comes before anyone can act on run's death) */
#define RUN_SPLIT 0
#endif
#ifndef LIVE          /* liveness (never claims L1, L2; pan -a -f -N L1): acquirer 0 keeps
                         trying until it acquires (its attempts start over after every
                         failure), the reclaim process is a periodic one (a timer runs it
                         for ever: it never stops on its own), neither is ever killed; no
                         final sweep */
#define LIVE 0
#endif
#ifndef CLEANUP       /* run the final sweep (P4/P5) */
#define CLEANUP (!LIVE)
#endif
/* Mutants: each must produce a counterexample. */
#ifndef MUT_FORCE_MALFORMED /* the old rule: --force removes any malformed lock */
#define MUT_FORCE_MALFORMED 0
#endif
#ifndef MUT_GUARD_AGE       /* a guard is removed by its age alone (no paused-holder check) */
#define MUT_GUARD_AGE 0
#endif
#ifndef MUT_RELEASE_NOTOKEN /* release renames and removes <lock> without the token checks */
#define MUT_RELEASE_NOTOKEN 0
#endif
#ifndef MUT_APNEA_NOGUARD   /* Apnea's stale reclamation without <lock>.reclaim */
#define MUT_APNEA_NOGUARD 0
#endif
#ifndef MUT_NO_REDECIDE     /* reclaim acts on the survey's decision, no re-decision under the guard */
#define MUT_NO_REDECIDE 0
#endif
#ifndef MUT_GUARD_RM_RACE   /* apnea-locks before issue 17: two reclaim processes remove a
                               guard without excluding each other (lstat, then rmdir by path) */
#define MUT_GUARD_RM_RACE 0
#endif
#ifndef MUT_NO_REREAD       /* Apnea's/run's reclamation skips s6.2's re-read under the guard */
#define MUT_NO_REREAD 0
#endif
#ifndef MUT_YOUNG_DEBRIS    /* reclaim --force removes pid-less debris younger than --guard-age */
#define MUT_YOUNG_DEBRIS 0
#endif
#ifndef MUT_PLAIN_EVIDENCE  /* plain reclaim (no --force) acts on clock evidence */
#define MUT_PLAIN_EVIDENCE 0
#endif
#ifndef MUT_KEEP_PIDLESS    /* reclaim --force never removes pid-less debris */
#define MUT_KEEP_PIDLESS 0
#endif
#ifndef MUT_KEEP_GUARD      /* reclaim --force never removes a leftover guard */
#define MUT_KEEP_GUARD 0
#endif
#ifndef MUT_GUARD_MARGIN    /* the paused-holder filter without its 60 s margin: a paused process
                               counts only if it started no later than the guard's ctime */
#define MUT_GUARD_MARGIN 0
#endif
#ifndef MUT_RM_R            /* release removes <lock> in place (rm -r: unlink owner.json, rmdir)
                               instead of renaming it to a tombstone first */
#define MUT_RM_R 0
#endif

/* ---------------------------------------------------------------- constants */
#define REF 0
#define RUN 1
#define FOREIGN 2
#define FLAV(a) ((a) == 0 -> FLAV0 : ((a) == 1 -> FLAV1 : FLAV2))

#define NACT (NA + NR)        /* actor ids: acquirers 0..NA-1, reclaimers NA..NACT-1 */
#define SWEEPER NACT          /* the final reclaim --force */
#define GHOST (NACT + 1)      /* the dead writer/holder of the INIT state */
#define NIDS (NACT + 2)

/* Time, in ticks of real time. PROTOCOL s4.3: "a repository lock whose directory mtime is at
 * least the grace (60 s) old"; s10: --guard-age, "guard age 1 min .. 30 days (default 5
 * min; a working guard lives for milliseconds)". An age is 0 (younger) or 1 (at least that
 * old): a lock's age is only compared with the grace and a guard's or a pid-less entry's
 * only with the guard age, so one tick stands for "enough time for either". */
#ifndef GRACE
#define GRACE 1
#endif
#ifndef GA
#define GA 1
#endif

/* Entries of the lock name. Objects are directory inodes carrying an owner record (lock,
 * candidate, tombstone); candidate k of acquirer a is object 1 + a*ATT + k, its token is
 * the object id (PROTOCOL s4.2: "new owner {pid: own pid, token: random uuid v4}"), so
 * "same token" is "same object". The guard is separate: `guard` is its inode (0: absent). */
#define GOBJ (1 + NA * ATT)   /* the INIT lock, written by GHOST */
#define MAXO GOBJ
#define NOBJ (MAXO + 1)
#define WRITER(o) ((o) == GOBJ -> GHOST : ((o) - 1) / ATT)
/* PROTOCOL s10: records "Apnea calls malformed ... wrong mode or owner, trailing bytes after
 * the JSON, an oversized file, a BOM still name their writer": the FOREIGN writer's. */
#define MALFORMED(o) ((o) != GOBJ && FLAV(WRITER(o)) == FOREIGN)

#define NONE 0   /* loc: where an object is */
#define CAND 1   /* <lock>.candidate.<token> */
#define LOCK 2   /* <lock> */
#define TOMB 3   /* <lock>.tombstone.<uuid> */

#define PNONE 0  /* proof classes, PROTOCOL s9 */
#define EVIDENCE 1
#define CERTAIN 2

#define KEEP 0   /* decisions, src/policy.cc */
#define REFUSE 1
#define RM_OWNER 2   /* RemovalKind::lock_owner */
#define RM_MALF 3    /* RemovalKind::lock_malformed */
#define RM_DEBRIS 4  /* RemovalKind::debris */
#define RM_GUARD 5   /* RemovalKind::guard */

/* ---------------------------------------------------------------- state */
byte loc[NOBJ];
bit wr[NOBJ];         /* owner.json written: the record names its writer's pid */
byte age[NOBJ];       /* ctime/mtime age, for locks (grace) and pid-less candidates */
byte lockobj;         /* the object at <lock>, 0: none */
byte guard;           /* <lock>.reclaim: its inode number as lstat shows it, 0: absent (with
                         GUARD_REUSE always 1: the number is handed back at once) */
byte gid;             /* which mkdir made the current guard (the model's own identity of it,
                         for the properties; no process can see it), 0: absent */
byte gseq;            /* mkdirs of the guard so far */
byte gholder = 255;   /* who made the current guard */
byte gage;            /* its age */
bit stepped;          /* the wall clock stepped forward by less than 60 s (not detected) */
bit cvoid;            /* clock evidence is void: a step was detected (btime vs /dev) */
short woff;           /* CLOCK_READINGS: the wall clock's offset since boot, btime - /dev's
                         birth, in units of 30 s (void beyond +-TDET) */
short gwoff;          /* CLOCK_READINGS: woff when the current guard was made: its ctime reads
                         (real time of its mkdir) + gwoff */
byte rmlock;          /* flock(LOCK_EX|LOCK_NB) of the lock area by a reclaim removing a
                         guard: its pid + 1, 0: free (the kernel drops it when it dies) */
byte nstep, nkill, npause;

bit acquired0;        /* acquirer 0 has published its lock (L2) */
bit ticked;           /* real time passed since acquirer 0 last failed (LIVE: its back-off) */
bit dead[NIDS];       /* crashed (killed) */
bit done[NIDS];       /* finished: its pid is gone too */
bit paused[NIDS];     /* stopped (T), traced (t) or frozen: visible in the process table */
byte npaused;
bit holding[NIDS];    /* believes it holds the lock (acquired, release not begun); for `run`,
                         its command is running */
bit orphan[NIDS];     /* RUN_SPLIT: `run` was killed while its command ran: the command runs on
                         until the shim has killed its session */
byte nholders;        /* live actors that believe they hold the lock */
byte mine[NIDS];      /* the object it published */
byte mguard[NIDS];    /* the guard (gid) it made and believes it holds, 0: none */
byte cand[NIDS];      /* its current candidate, 0: none */

#define ALIVE(a) ((a) < NACT + 1 && !dead[a] && !done[a])
#define RUNNING(a) (ALIVE(a) && !paused[a])
#define ALLDONE (nholders == 0 && npaused == 0 && ACTDONE(0) && ACTDONE(1) && ACTDONE(2) && ACTDONE(3) && ACTDONE(4))
#define ACTDONE(a) ((a) >= NACT || dead[a] || done[a])

/* Every step of an actor is one atomic block starting with RUNS: a paused actor takes none. */
#define RUNS !paused[me] ->

/* Every reader of <lock> follows the protocol's writers only: P6 is checked unless a writer
 * of malformed records or a human is in the run. */
#define HAS_FOREIGN (FLAV0 == FOREIGN || (NA > 1 && FLAV1 == FOREIGN) || (NA > 2 && FLAV2 == FOREIGN))
#define CHECK_P6 (!DISPLACE && !HAS_FOREIGN)

/* ---------------------------------------------------------------- properties */
/* Each property's violation is one condition, a #define named P<n>_BAD (check.py --meta makes
 * each in turn vacuous and requires the check to fail), and one assertion over its own
 * variable, so that pan's "assertion violated !(p<n>_violated)" names the property. */
bit p1_violated, p2_violated, p3_violated, p3r_violated, p4_violated, p5_violated, p6_violated;

/* P1: never two live holders. Checked when a lock is published. */
#define P1_BAD (!DISPLACE && nholders > 0)
inline p1_publish() {
  if
  :: P1_BAD ->
     printf("MODEL P1 violated: actor %d published while another live actor holds the lock\n", me);
     p1_violated = 1; assert(!p1_violated)
  :: else -> skip
  fi
}

/* P2: never a removal (unlink of owner.json, rmdir, or a rename away from <lock>) of an entry
 * whose writer is alive, by anyone but the writer. PROTOCOL s10: "An entry (lock, candidate
 * or tombstone) whose owner record names a pid that is not proven dead is never removed, by
 * any command, with any flag." A pid-less entry of a live writer is flagged with
 * CHECK_OWNERLESS (on unless writers may stop before owner.json: the --force trust "an
 * ownerless entry older than --guard-age is abandoned"). */
#define P2_BAD(o) (!DISPLACE && !ONLY_P1 && WRITER(o) != me && ALIVE(WRITER(o)) && (wr[o] || CHECK_OWNERLESS))
inline p2_remove(o) {
  if
  :: P2_BAD(o) ->
     printf("MODEL P2 violated: actor %d removes entry %d (loc %d, owner.json %d) whose writer %d is alive\n",
            me, o, loc[o], wr[o], WRITER(o));
     p2_violated = 1; assert(!p2_violated)
  :: else -> skip
  fi
}

/* P2 for the guard: never removed by anyone but its holder while the holder is alive. */
#define P2_GUARD_BAD (!DISPLACE && !ONLY_P1 && gholder != me && ALIVE(gholder) && mguard[gholder] == gid)
inline p2_guard() {
  if
  :: P2_GUARD_BAD ->
     printf("MODEL P2 violated: actor %d removes guard %d of live holder %d\n", me, gid, gholder);
     p2_violated = 1; assert(!p2_violated)
  :: else -> skip
  fi
}

/* P3: nobody deletes another owner's lock: what a releaser deletes (unlinks owner.json of,
 * rmdirs) is its own lock, and the guard a process removes as its own is its own guard. It
 * holds with a human's rm -r too (DISPLACE). */
#define P3_BAD(t) (!ONLY_P1 && (t) != mine[me])
inline p3_own(t) {
  if
  :: P3_BAD(t) ->
     printf("MODEL P3 violated: actor %d releasing its lock %d deletes entry %d of %d\n",
            me, mine[me], t, WRITER(t));
     p3_violated = 1; assert(!p3_violated)
  :: else -> skip
  fi
}
#define P3_GUARD_BAD (!ONLY_P1 && !DISPLACE && gid != mguard[me])
inline p3_guard() {
  if
  :: P3_GUARD_BAD ->
     printf("MODEL P3 violated: actor %d removes guard %d, not its own guard %d\n", me, gid, mguard[me]);
     p3_violated = 1; assert(!p3_violated)
  :: else -> skip
  fi
}
/* P3R, a boundary (checked only with CHECK_RENAME): a release renames only its own lock.
 * Apnea's release reads the token, then renames: after a human's rm -r of the lock and a new
 * owner's publication in between, it renames the new owner's lock to a tombstone (and keeps
 * it, the tombstone's token being another's). */
#define P3R_BAD(t) (CHECK_RENAME && !ONLY_P1 && (t) != mine[me])
inline p3r_rename(t) {
  if
  :: P3R_BAD(t) ->
     printf("MODEL P3R violated: actor %d releasing its lock %d renames entry %d of %d\n",
            me, mine[me], t, WRITER(t));
     p3r_violated = 1; assert(!p3r_violated)
  :: else -> skip
  fi
}

/* P6: no reader sees <lock> without its owner record (Apnea: "malformed") while every writer
 * follows the protocol: a lock is published whole by rename and leaves <lock> by rename, so
 * <lock> always has its owner.json. Checked wherever <lock> is read. */
#define P6_BAD (CHECK_P6 && lockobj != 0 && !wr[lockobj])
inline p6_read() {
  if
  :: P6_BAD ->
     printf("MODEL P6 violated: actor %d reads <lock> (entry %d) without owner.json: malformed\n", me, lockobj);
     p6_violated = 1; assert(!p6_violated)
  :: else -> skip
  fi
}

/* P4 and P5 are checked at the end of the final sweep (Reclaim, sweep = 1). With the clock
 * void (CLOCK_READINGS) no age counts: `reclaim --force` refuses every guard and every
 * pid-less entry and tells the operator to check that no Apnea runs and remove it by hand;
 * those, and what a guard blocks (VOID_LEFT), are left to the operator. */
#define VOID_LEFT (CLOCK_READINGS && cvoid && guard != 0)
#define P4_BAD(e) (loc[e] != NONE && !VOID_LEFT && !(CLOCK_READINGS && cvoid && !wr[e]))
#define P5_BAD (guard != 0 && !VOID_LEFT)

/* ---------------------------------------------------------------- the proofs (section 9) */
/* What a probe of the record's pid gives now. PROTOCOL s9: a certain proof ("no clock
 * involved") is true only of a dead writer; clock evidence ("pid-reused", "predates-boot") can
 * be faked: "A forward step of the wall clock between writing the lock and checking it ...
 * fakes both", unless "clock evidence is void". After an undetected step, the model lets any
 * live writer's record show evidence (really only records written before the step: more
 * behaviours, never fewer). A dead writer has a certain proof ("pid-dead": every process of
 * the model is visible; pid reuse would only weaken it to evidence or none). */
inline probe(o, p) {
  if
  :: !ALIVE(WRITER(o)) -> p = CERTAIN
  :: ALIVE(WRITER(o)) && stepped && !cvoid && FAKE_EVIDENCE -> p = EVIDENCE
  :: ALIVE(WRITER(o)) -> p = PNONE
  fi
}

/* ---------------------------------------------------------------- the one policy (section 10) */
/* decide_guard. PROTOCOL s10 table, reclaim guard: `reclaim` never; `--force`: "older than
 * --guard-age by the latest of its mtime and ctime ..., and no process ... that started no
 * later than 60 s after the guard's ctime is paused". src/classify.cc judge_guard_holder:
 * a paused process is passed over when the clock is trusted (not void), its start time is
 * known and `start_time_ns > guard.ctime_ns + 60 s`; start_time_ns is btime (read now, so
 * in the clock's current offset) plus its start ticks, the ctime the clock's reading at the
 * guard's mkdir. Every actor started before any guard at real time 0 (the worst case: it
 * made its guard at once), so its start reads woff now, the guard's ctime gwoff, and it is
 * passed over when woff - gwoff > MARGIN. src/policy.cc decide_guard, older_than_guard_age:
 * with the clock void no age counts ("refused after what else blocks it"). */
#define TDET 2                                  /* 60 s: s9's void threshold */
#define MARGIN (MUT_GUARD_MARGIN -> 0 : 2)      /* 60 s: the filter's margin */
#define HOLDER_PAUSED (npaused > 0 && (!CLOCK_READINGS || cvoid || woff - gwoff <= MARGIN))
/* (one expression: decide_guard is expanded wherever a decision is made) */
inline decide_guard(F, d) {
  d = (gage < GA -> KEEP :                                  /* a reclamation in progress */
       ((HOLDER_PAUSED && !MUT_GUARD_AGE) -> REFUSE :       /* a paused process may hold it */
        ((CLOCK_READINGS && cvoid) -> REFUSE :              /* no age counts */
         ((F && !MUT_KEEP_GUARD) -> RM_GUARD : REFUSE))))
}

/* guard_blocks: a lock's (or debris') guard, unless we hold it ourselves. gb: 0 not blocking
 * (absent, or this run removes it first), 1 young (a reclamation in progress), 2 refused. */
inline guard_blocks(F, own, gb, d3) {
  if
  :: own || guard == 0 -> gb = 0
  :: !own && guard != 0 && gage < GA -> gb = 1
  :: !own && guard != 0 && gage >= GA ->
     decide_guard(F, d3);
     gb = (d3 == RM_GUARD -> 0 : 2)
  fi
}

/* decide_lock. Table: "lock, valid owner: reclaim: proof: certain; --force adds proof:
 * evidence"; "lock, malformed, names pids: reclaim never; --force: all named pids proven dead
 * (certain, or clock evidence)". */
inline decide_lock(o, F, own, d, p, gb, d3) {
  probe(o, p);
  guard_blocks(F, own, gb, d3);
  if
  :: !wr[o] -> d = REFUSE     /* no owner.json (only a mutant makes such a lock): kept */
  :: wr[o] && MALFORMED(o) ->
     if
     :: F && MUT_FORCE_MALFORMED && gb == 0 -> d = RM_MALF       /* the old rule */
     :: F && p != PNONE && gb == 0 -> d = RM_MALF
     :: else -> d = REFUSE
     fi
  :: wr[o] && !MALFORMED(o) ->
     if
     :: gb == 0 && (p == CERTAIN || (p == EVIDENCE && (F || MUT_PLAIN_EVIDENCE))) -> d = RM_OWNER
     :: else -> d = REFUSE
     fi
  fi
}

/* decide_transient. Table: "candidate / tombstone: reclaim: its pids certainly dead; --force
 * adds clock evidence; or pid-less" (older than --guard-age by ctime). Work in progress is
 * kept: a record naming a pid not proven dead, a pid-less one younger than --guard-age, any
 * while its lock's guard is younger than --guard-age. */
/* OLD: older than --guard-age. With CLOCK_READINGS, no age counts while the clock is void
 * (src/policy.cc older_than_guard_age); without, ages count whatever the clock (the first
 * model's rule, which boundary-void-clock shows). */
#define OLD(o) (age[o] >= GA && !(CLOCK_READINGS && cvoid))
inline decide_transient(o, F, own, d, p, gb, d3) {
  if
  :: !wr[o] && !OLD(o) && !MUT_YOUNG_DEBRIS -> d = KEEP
  :: !wr[o] && (OLD(o) || MUT_YOUNG_DEBRIS) ->
     guard_blocks(F, own, gb, d3);
     if
     :: gb == 1 -> d = KEEP
     :: gb == 2 -> d = REFUSE
     :: gb == 0 -> d = ((F && !MUT_KEEP_PIDLESS) -> RM_DEBRIS : REFUSE)
     fi
  :: wr[o] ->
     probe(o, p);
     guard_blocks(F, own, gb, d3);
     if
     :: p == PNONE || gb == 1 -> d = KEEP
     :: p != PNONE && gb == 2 -> d = REFUSE
     :: p != PNONE && gb == 0 -> d = ((p == CERTAIN || F || MUT_PLAIN_EVIDENCE) -> RM_DEBRIS : REFUSE)
     fi
  fi
}

/* decide(): entry e is 0 for the guard, else an object. */
inline decide(e, F, own, d, p, gb, d3) {
  if
  :: e == 0 && guard == 0 -> d = KEEP
  :: e == 0 && guard != 0 -> decide_guard(F, d)
  :: e != 0 && e != 255 && loc[e] == LOCK -> decide_lock(e, F, own, d, p, gb, d3)
  :: e != 0 && e != 255 && (loc[e] == CAND || loc[e] == TOMB) -> decide_transient(e, F, own, d, p, gb, d3)
  :: e == 255 || (e != 0 && loc[e] == NONE) -> d = KEEP
  fi
}

/* ---------------------------------------------------------------- shared steps */
/* PROTOCOL s6.1: "mkdir <lock>.reclaim (mode 0700); if it exists: fail". */
inline take_guard(ok) {
  if
  :: guard != 0 -> ok = 0
  :: guard == 0 -> gseq++; gid = gseq; guard = (GUARD_REUSE -> 1 : gseq); gholder = me; gage = 0; gwoff = woff;
     mguard[me] = gid; ok = 1
  fi
}
/* rmdir(<lock>.reclaim) by path: removes whatever guard is there. */
inline drop_guard(ok) {
  if
  :: guard == 0 -> ok = 0                       /* ENOENT */
  :: guard != 0 -> p3_guard(); guard = 0; gid = 0; gage = 0; gwoff = 0; gholder = 255; ok = 1
  fi;
  mguard[me] = 0
}
inline gone(o) { loc[o] = NONE; wr[o] = 0; age[o] = 0 }
/* PROTOCOL s10: "unlink owner.json ..., then rmdir the entry": two steps with SPLIT_RM (a
 * crash between leaves a pid-less entry), one without. The entry is found again by its name,
 * which holds its token or uuid: rmdir_entry removes it only if it is still there as l. */
inline unlink_owner(o) {
  wr[o] = 0;
  if :: !SPLIT_RM -> gone(o) :: else -> skip fi
}
inline rmdir_entry(o, l) {
  if :: SPLIT_RM && loc[o] == l -> gone(o) :: else -> skip fi
}

/* ---------------------------------------------------------------- Apnea and run (s4-s6) */
/* Steps are atomic where nothing another actor can do in between changes the outcome:
 * - "inspect" reads <lock>'s owner, probes its pid and reads the lock's age at once. Apart
 *   they are three syscalls, but a pid found dead stays dead (no pid is reused in the
 *   model), and whatever was decided from them is re-checked under the guard by token;
 * - a rename to a tombstone and the re-read of the tombstone's token are one step: a
 *   tombstone's name is new (a uuid) and only its writer, or a holder of the guard, touches
 *   it. */
proctype Acquirer(byte me; byte flav) {
  byte k, o, x, t;
  bit cont, ok, ok2;
  {
  k = 0;
retry:
  k = 0;
  do
  :: k < (flav == FOREIGN -> 1 : ATT) ->
     o = 1 + me * ATT + k;
     k++;
     /* s4.2: "write the candidate <lock>.candidate.<token>" (s3: "written once, fsynced, then
      * the directory fsynced"): mkdir, then owner.json */
     atomic { RUNS loc[o] = CAND; wr[o] = 0; age[o] = 0; cand[me] = o;
       printf("[pid %d] mkdir candidate %d\n", me, o) }
     atomic { RUNS
       if
       :: loc[o] == CAND -> wr[o] = 1; printf("[pid %d] write candidate %d's owner.json\n", me, o)
       :: loc[o] != CAND -> cand[me] = 0; printf("[pid %d] candidate %d is gone: error\n", me, o); goto failed
       fi }
     /* s4.2: "if <lock> exists (lstat), it is contended, else rename(candidate, lock);
      * EEXIST/ENOTEMPTY/EPERM from rename also mean contended" */
     atomic { RUNS cont = (lockobj != 0); printf("[pid %d] lstat <lock>: entry %d\n", me, lockobj) }
     if
     :: !cont ->
        atomic { RUNS
          if
          :: lockobj != 0 -> cont = 1; printf("[pid %d] rename candidate %d to <lock>: EEXIST\n", me, o)
          :: lockobj == 0 && loc[o] != CAND ->
             cand[me] = 0; printf("[pid %d] rename candidate %d: ENOENT, error\n", me, o); goto failed
          :: lockobj == 0 && loc[o] == CAND ->
             printf("[pid %d] rename candidate %d to <lock>: published, holds the lock\n", me, o);
             p1_publish();
             loc[o] = LOCK; lockobj = o; age[o] = 0;
             holding[me] = 1; nholders++; mine[me] = o; cand[me] = 0;
             if :: me == 0 -> acquired0 = 1 :: else -> skip fi
          fi }
     :: cont -> skip
     fi;
     if
     :: !cont -> goto hold
     :: cont ->
        /* s4.2: "The candidate is always removed afterwards." (remove_tree: unlink
         * owner.json, then rmdir) */
        atomic { RUNS
          if
          :: loc[o] == CAND -> unlink_owner(o); printf("[pid %d] remove candidate %d: unlink owner.json\n", me, o)
          :: else -> skip
          fi }
        atomic { RUNS rmdir_entry(o, CAND); cand[me] = 0 }
     fi;
     if
     :: flav == FOREIGN -> goto failed       /* the other writer gives up */
     :: else -> skip
     fi;
     /* s4.3: "On contention: if <lock> vanished, try again. Otherwise read its owner:
      * malformed: fail ...; owner pid alive (kill(pid, 0) does not fail with ESRCH): reason
      * live; dead owner of a repository lock whose directory mtime is at least the grace
      * (60 s) old: reclaim it (section 6) and try again; otherwise reason stale."
      * Apnea 0.2.2 may also read a lock that vanished after its lstat as malformed (s8). */
     atomic { RUNS
       x = lockobj;
       p6_read();
       ok = (x != 0 && wr[x] && !MALFORMED(x) && !ALIVE(WRITER(x)) && age[x] >= GRACE);
       printf("[pid %d] contended: <lock> is entry %d (writer pid %d); dead and past the grace: %d\n",
              me, x, WRITER(x), ok) }
     if
     :: x == 0 -> goto next
     :: x == 0 && flav == REF -> goto failed
     :: x != 0 && !ok -> goto failed
     :: x != 0 && ok -> skip
     fi;
     /* s6.1: "mkdir <lock>.reclaim (mode 0700); if it exists: fail reason stale" */
     if
     :: MUT_APNEA_NOGUARD -> skip
     :: !MUT_APNEA_NOGUARD ->
        atomic { RUNS take_guard(ok); printf("[pid %d] mkdir <lock>.reclaim: %d (guard %d)\n", me, ok, guard);
          if
          :: !ok -> goto failed
          :: ok -> skip
          fi }
     fi;
     /* s6.2: "Under the guard: re-read the owner; only if the token is still the dead
      * owner's, rename to a tombstone, verify the token, remove the tombstone." */
     atomic { RUNS p6_read(); ok = (lockobj == x || (MUT_NO_REREAD && lockobj != 0));
       printf("[pid %d] re-read <lock>: entry %d; token still %d's: %d\n", me, lockobj, x, ok) }
     if
     :: ok ->
        atomic { RUNS
          if
          :: lockobj == 0 -> ok = 0                                    /* ENOENT */
          :: lockobj != 0 -> t = lockobj; p2_remove(t); loc[t] = TOMB; lockobj = 0; age[t] = 0;
             ok = (t == x);
             printf("[pid %d] rename <lock> (entry %d) to a tombstone; its token is %d's: %d\n", me, t, x, ok)
          fi }
        if
        :: ok ->
           atomic { RUNS printf("[pid %d] remove tombstone %d: unlink owner.json\n", me, t); p2_remove(t); unlink_owner(t) }
           atomic { RUNS rmdir_entry(t, TOMB) }
        :: !ok -> skip                              /* a tombstone not ours is left */
        fi
     :: !ok -> skip
     fi;
     /* "Then remove the guard." (Apnea: in `finally`; a missing guard throws ENOENT) */
     if
     :: MUT_APNEA_NOGUARD -> skip
     :: !MUT_APNEA_NOGUARD ->
        atomic { RUNS printf("[pid %d] rmdir <lock>.reclaim (guard %d; mine %d)\n", me, guard, mguard[me]);
          drop_guard(ok2);
          if
          :: !ok2 -> goto failed
          :: ok2 -> skip
          fi }
     fi;
     /* Apnea 0.2.2: a reclamation that removed nothing fails `stale`; run (lock.cc) tries
      * again "whatever the guard found". */
     if
     :: !ok && flav == REF -> goto failed
     :: else -> skip
     fi;
next: skip;
     d_step { x = 0; t = 0; ok = 0; ok2 = 0; cont = 0 }   /* (forget what this attempt saw) */
  :: k >= (flav == FOREIGN -> 1 : ATT) -> goto failed    /* s4.4: "After 3 attempts: raced" */
  od;

hold: skip;
  d_step { x = 0; t = 0; ok = 0; ok2 = 0; cont = 0 }
  /* The operation runs, then the release (s5). The FOREIGN writer's record is malformed, so
   * no token-checked release can read it: it leaves its lock behind when it ends. */
  atomic { RUNS holding[me] = 0; nholders--; printf("[pid %d] operation done\n", me) }
  if
  :: flav == FOREIGN -> goto finish
  :: else -> skip
  fi;
  /* s5: "if the owner record still has my token, rename <lock> to <lock>.tombstone.<uuid>,
   * re-read the tombstone's token, and if it is mine, remove the tombstone recursively. A
   * displaced or replaced lock is never removed." */
  atomic { RUNS p6_read(); ok = (lockobj == mine[me] || (MUT_RELEASE_NOTOKEN && lockobj != 0));
    printf("[pid %d] release: <lock> is entry %d, mine is %d: %d\n", me, lockobj, mine[me], ok) }
  if
  :: ok && !MUT_RM_R ->
     atomic { RUNS
       if
       :: lockobj == 0 -> ok = 0
       :: lockobj != 0 -> t = lockobj; p3r_rename(t); p2_remove(t); loc[t] = TOMB; lockobj = 0; age[t] = 0;
          ok = (t == mine[me] || MUT_RELEASE_NOTOKEN);
          printf("[pid %d] rename <lock> (entry %d) to a tombstone; its token is mine: %d\n", me, t, t == mine[me])
       fi }
     if
     :: ok ->
        atomic { RUNS printf("[pid %d] remove tombstone %d: unlink owner.json\n", me, t); p3_own(t); p2_remove(t); unlink_owner(t) }
        atomic { RUNS rmdir_entry(t, TOMB) }
     :: !ok -> skip                                 /* another's tombstone is kept */
     fi
  :: ok && MUT_RM_R ->
     /* the mutant: rm -r <lock> in place, no tombstone: unlink <lock>/owner.json, rmdir <lock> */
     atomic { RUNS
       if
       :: lockobj == 0 -> ok = 0
       :: lockobj != 0 -> t = lockobj; p3_own(t); p2_remove(t); wr[t] = 0;
          printf("[pid %d] rm -r <lock> (entry %d): unlink owner.json\n", me, t)
       fi }
     atomic { RUNS
       if
       :: ok && lockobj == t && !wr[t] -> gone(t); lockobj = 0; printf("[pid %d] rmdir <lock>\n", me)
       :: else -> skip                               /* ENOENT, or ENOTEMPTY */
       fi }
  :: !ok -> skip
  fi;
finish:
failed:
  /* LIVE: acquirer 0 keeps trying (a loop around acquire, as a user or a service would),
   * sleeping between two tries: it tries again once real time has passed (a tick; without
   * the sleep, weak fairness alone would let it retry so fast that the clock, disabled while
   * its candidate has no owner.json yet, never ticks: a livelock of the model, not of the
   * protocol). Its candidates are numbered again from the first, once every one of them is
   * gone (a new token each time, in reality: no other process keeps a judgement of the old
   * one alive, since every removal is re-checked under the guard). */
  if
  :: LIVE && me == 0 && !acquired0 ->
     d_step { ticked = 0 }
     atomic { RUNS ticked && loc[1 + me * ATT] == NONE && (ATT < 2 || loc[2 + me * ATT] == NONE) &&
                   (ATT < 3 || loc[3 + me * ATT] == NONE) ->
       ticked = 0;
       printf("[pid %d] tries again\n", me);
       k = 0; o = 0; x = 0; t = 0; ok = 0; ok2 = 0; cont = 0 }
     goto retry
  :: else -> skip
  fi;
  atomic { done[me] = 1; cand[me] = 0; mine[me] = 0; printf("[pid %d] exits\n", me);
    k = 0; o = 0; x = 0; t = 0; ok = 0; ok2 = 0; cont = 0 }
  } unless { dead[me] -> d_step { k = 0; o = 0; x = 0; t = 0; ok = 0; ok2 = 0; cont = 0 } }
}

/* ---------------------------------------------------------------- apnea-locks reclaim */
/* One reclaim process (sweep = 0), or the final `reclaim --force` run alone once every actor
 * has finished (sweep = 1). The survey judges an entry; its removal is carried out as
 * src/removal.cc (carry_out) does. PROTOCOL s10: "The real reclaim adds nothing but the re-validation
 * under the guard". */
proctype Reclaim(byte me; bit F; bit sweep) {
  byte n, e, d, d2, d3, p, gb, g, sl, t;
  bit ok, ok2;
  {
  n = 0;
  do
  :: n < (sweep -> 3 * NOBJ : (me == NA -> RSTEPS : RSTEPS2)) ->
     /* The survey: one entry judged now. A sweep takes the first removable entry in
      * reclaim's order: "Guards first ..., then locks, then candidates and tombstones". */
     atomic { RUNS
       p6_read();       /* the survey lists the area and reads <lock>'s owner.json */
       if
       :: !sweep && !LIVE ->
          if
          :: guard != 0 -> e = 0
          :: lockobj != 0 -> e = lockobj
          :: true ->
             e = 1;
             do
             :: e <= MAXO && (loc[e] == CAND || loc[e] == TOMB) -> break
             :: e <= MAXO -> e++
             :: e > MAXO -> e = 255; break
             od
          fi;
          decide(e, F, 0, d, p, gb, d3)
       :: sweep || LIVE ->   /* (a periodic reclaim surveys in the same order) */
          e = 0; decide(e, F, 0, d, p, gb, d3);
          if
          :: d < RM_OWNER && lockobj != 0 -> e = lockobj; decide(e, F, 0, d, p, gb, d3)
          :: else -> skip
          fi;
          if
          :: d < RM_OWNER ->
             e = 1;
             do
             :: e <= MAXO && (loc[e] == CAND || loc[e] == TOMB) ->
                decide(e, F, 0, d, p, gb, d3);
                if
                :: d >= RM_OWNER -> break
                :: else -> e++
                fi
             :: e <= MAXO && !(loc[e] == CAND || loc[e] == TOMB) -> e++
             :: e > MAXO -> e = 255; d = KEEP; break
             od
          :: else -> skip
          fi
       fi;
       g = guard;
       sl = (e != 0 && e != 255 -> loc[e] : NONE);
       if
       :: d >= RM_OWNER -> printf("[pid %d] survey: entry %d (0: guard %d) to be removed, as %d\n", me, e, g, d)
       :: else -> skip
       fi }
     if
     :: sweep && d < RM_OWNER -> break         /* nothing left that may be removed */
     :: d >= RM_OWNER && !(LIVE && !sweep) -> n++   /* (n counts removals: judging alone changes nothing) */
     :: d >= RM_OWNER && LIVE && !sweep -> skip     /* a periodic reclaim never runs out */
     :: else -> skip
     fi;
     if
     :: d == RM_GUARD ->
        /* execute_repair, RemovalKind::guard: under an exclusive flock of the lock area (only
         * reclaim removes a guard it does not hold: two of them must not interleave),
         * redecide (the entry gathered again, the paused processes read again), then lstat:
         * "same object", a directory; then rmdir. */
        atomic { RUNS
          if
          :: MUT_GUARD_RM_RACE -> ok2 = 1
          :: !MUT_GUARD_RM_RACE && rmlock == 0 -> rmlock = me + 1; ok2 = 1
          :: !MUT_GUARD_RM_RACE && rmlock != 0 -> ok2 = 0      /* EWOULDBLOCK: guard-held */
          fi;
          if
          :: ok2 && guard == g && !MUT_NO_REDECIDE -> decide(0, F, 0, d2, p, gb, d3)
          :: ok2 && guard == g && MUT_NO_REDECIDE -> d2 = RM_GUARD
          :: !ok2 || guard != g -> d2 = KEEP
          fi;
          printf("[pid %d] re-decide guard %d: %d (paused processes: %d)\n", me, g, d2, npaused) }
        if
        :: d2 == RM_GUARD ->
           atomic { RUNS ok = (guard == g); printf("[pid %d] lstat guard: same object: %d\n", me, ok) }
           if
           :: ok ->
              atomic { RUNS
                printf("[pid %d] rmdir <lock>.reclaim (guard %d, made by pid %d)\n", me, guard, gholder);
                if
                :: guard != 0 -> p2_guard(); guard = 0; gid = 0; gage = 0; gwoff = 0; gholder = 255
                :: guard == 0 -> skip
                fi;
                if :: rmlock == me + 1 -> rmlock = 0 :: else -> skip fi }
           :: !ok -> skip
           fi
        :: d2 != RM_GUARD -> skip
        fi;
        d_step { if :: rmlock == me + 1 -> rmlock = 0 :: else -> skip fi }
     :: d == RM_OWNER || d == RM_MALF ->
        /* reclaim_guarded (src/lock.cc): "takes <lock>.reclaim; fails stale with Apnea's
         * guarded message when it exists; under the guard re-validates the lock against
         * expect and only then renames it to a tombstone, verifies again, removes the
         * tombstone and drops the guard." The confirmation (redecide, with the guard ours)
         * and remove_if_owned's token read are one step: under the guard only the lock's
         * dead writer could change the lock. */
        atomic { RUNS take_guard(ok); printf("[pid %d] mkdir <lock>.reclaim: %d (guard %d)\n", me, ok, guard) }
        if
        :: ok ->
           atomic { RUNS
             if
             :: lockobj == e && !MUT_NO_REDECIDE -> decide(e, F, 1, d2, p, gb, d3); ok = (d2 == d)
             :: lockobj == e && MUT_NO_REDECIDE -> ok = 1
             :: lockobj != e -> ok = 0            /* "it changed since it was inspected" */
             fi;
             printf("[pid %d] re-decide <lock> (entry %d) under the guard, token or bytes unchanged: %d\n", me, e, ok) }
           if
           :: ok ->
              atomic { RUNS
                if
                :: lockobj == 0 -> ok = 0
                :: lockobj != 0 -> t = lockobj; p2_remove(t); loc[t] = TOMB; lockobj = 0; age[t] = 0;
                   ok = (t == e);
                   printf("[pid %d] rename <lock> (entry %d) to a tombstone; still entry %d: %d\n", me, t, e, ok)
                fi }
              if
              :: ok ->
                 /* s10: "open it as a directory with O_NOFOLLOW, check it is the same device
                  * and inode that was judged, unlink owner.json ..., then rmdir the entry" */
                 atomic { RUNS printf("[pid %d] remove tombstone %d: unlink owner.json\n", me, t); p2_remove(t); unlink_owner(t) }
                 atomic { RUNS rmdir_entry(t, TOMB) }
              :: !ok -> skip                      /* "the renamed lock changed; kept" */
              fi
           :: !ok -> skip
           fi;
           atomic { RUNS printf("[pid %d] rmdir <lock>.reclaim (guard %d; mine %d)\n", me, guard, mguard[me]); drop_guard(ok2) }
        :: !ok -> skip                            /* guard-held */
        fi
     :: d == RM_DEBRIS ->
        /* RemovalKind::debris: "Candidates and tombstones, like locks, are removed only while
         * holding <lock>.reclaim" (GuardHold), redecide, remove_entry (same object, never
         * recursive), drop the guard. */
        atomic { RUNS take_guard(ok); printf("[pid %d] mkdir <lock>.reclaim: %d (guard %d)\n", me, ok, guard) }
        if
        :: ok ->
           atomic { RUNS
             if
             :: loc[e] == sl && !MUT_NO_REDECIDE -> decide(e, F, 1, d2, p, gb, d3); ok = (d2 == RM_DEBRIS)
             :: loc[e] == sl && MUT_NO_REDECIDE -> ok = 1
             :: loc[e] != sl -> ok = 0
             fi;
             printf("[pid %d] re-decide entry %d under the guard: %d\n", me, e, ok) }
           if
           :: ok ->
              atomic { RUNS
                if
                :: loc[e] == sl -> printf("[pid %d] remove entry %d (loc %d): unlink owner.json\n", me, e, sl); p2_remove(e); unlink_owner(e)
                :: loc[e] != sl -> skip           /* "it is already gone" */
                fi }
              atomic { RUNS rmdir_entry(e, sl) }
           :: !ok -> skip
           fi;
           atomic { RUNS printf("[pid %d] rmdir <lock>.reclaim (guard %d; mine %d)\n", me, guard, mguard[me]); drop_guard(ok2) }
        :: !ok -> skip
        fi
     :: d < RM_OWNER -> skip                       /* keep / refuse */
     fi;
     d_step { e = 0; d = 0; d2 = 0; d3 = 0; p = 0; gb = 0; g = 0; sl = 0; t = 0; ok = 0; ok2 = 0 }
  :: !sweep && !LIVE -> break                      /* a run may stop at any time */
  :: n >= (sweep -> 3 * NOBJ : (me == NA -> RSTEPS : RSTEPS2)) -> break
  od;
  if
  :: sweep ->
     /* P4/P5: once every process has finished, `reclaim --force` leaves nothing behind: no
      * crashed holder's guard (checked first: a guard left blocks the lock's removal too), no
      * dead owner's lock, no debris. */
     if
     :: P5_BAD ->
        printf("MODEL P5 violated: guard %d (made by %d) left after the final reclaim --force\n", gid, gholder);
        p5_violated = 1; assert(!p5_violated)
     :: else -> skip
     fi;
     e = 1;
     do
     :: e <= MAXO && P4_BAD(e) ->
        printf("MODEL P4 violated: entry %d (loc %d, writer %d) left after the final reclaim --force\n",
               e, loc[e], WRITER(e));
        p4_violated = 1; assert(!p4_violated)
     :: e <= MAXO && !P4_BAD(e) -> e++
     :: e > MAXO -> break
     od
  :: else -> skip
  fi;
  atomic { done[me] = 1; n = 0; e = 0 }
  } unless { dead[me] -> d_step { n = 0; e = 0; d = 0; d2 = 0; d3 = 0; p = 0; gb = 0; g = 0; sl = 0; t = 0; ok = 0; ok2 = 0 } }
}

/* ---------------------------------------------------------------- the environment */
/* Real time and the wall clock, "a clock that only advances". A tick is real time passing.
 * Timing assumption: a running (not stopped) process takes less than the guard age between
 * two steps, so a tick may not make the guard of a running holder, or the pid-less candidate
 * of a running writer, reach GA. Steps are jumps of the wall clock (s9). */
#define GUARD_TICK_OK (guard == 0 || gage + 1 < GA || !(gholder < NIDS) || !RUNNING(gholder) || mguard[gholder] != gid)
#define CAND_TICK_OK(a) ((a) >= NA || cand[a] == 0 || wr[cand[a]] || loc[cand[a]] != CAND || age[cand[a]] + 1 < GA || !RUNNING(a))
#define TICK_OK (GUARD_TICK_OK && CAND_TICK_OK(0) && CAND_TICK_OK(1) && CAND_TICK_OK(2))

active proctype Clock() {
  byte o;
end_clock:
  do
  :: atomic { TICKS && !ALLDONE && TICK_OK ->
       o = 1;
       do
       :: o <= MAXO ->
          if
          :: (loc[o] == LOCK && age[o] < GRACE) || (loc[o] == CAND && !wr[o] && age[o] < GA) -> age[o]++
          :: else -> skip
          fi;
          o++
       :: o > MAXO -> break
       od;
       if
       :: guard != 0 && gage < GA -> gage++
       :: else -> skip
       fi;
       o = 0; ticked = LIVE;
       printf("[clock] tick: guard age %d, lock age %d\n", gage, age[lockobj]) }
  :: atomic { (STEPS & 1) && nstep < MAXSTEP && !ALLDONE ->
       /* a small forward step (up to 60 s): not detected, it fakes clock evidence */
       nstep++; stepped = 1;
       if
       :: CLOCK_READINGS -> /* 30 or 60 s; the gap since boot decides whether it is seen */
          if :: woff = woff + 1 :: woff = woff + 2 fi;
          cvoid = (woff > TDET || woff < -TDET)
       :: else -> skip
       fi;
       printf("[clock] small forward step (clock offset since boot now %d x 30 s; void: %d)\n", woff, cvoid) }
  :: atomic { (STEPS & 8) && CLOCK_READINGS && nstep < MAXSTEP && !ALLDONE ->
       /* a small backward step (up to 60 s): not detected. Ages are not set back (an entry
        * looking younger is only kept longer: fewer removals, never more) and no clock
        * evidence is faked (start times move earlier) */
       nstep++;
       if :: woff = woff - 1 :: woff = woff - 2 fi;
       cvoid = (woff > TDET || woff < -TDET);
       printf("[clock] small backward step (clock offset since boot now %d x 30 s; void: %d)\n", woff, cvoid) }
  :: atomic { (STEPS & 6) && nstep < MAXSTEP && !ALLDONE ->
       /* a big forward step: every age jumps past the guard age. An NTP step is detected
        * (s9: "when they differ by more than 60 s, clock evidence is void"); a suspend and
        * resume is not (btime does not move), nor does it fake clock evidence (start times
        * count from boot) */
       nstep++;
       o = 1;
       do
       :: o <= MAXO ->
          if
          :: loc[o] == LOCK -> age[o] = GRACE
          :: loc[o] == CAND && !wr[o] -> age[o] = GA
          :: else -> skip
          fi;
          o++
       :: o > MAXO -> break
       od;
       if :: guard != 0 -> gage = GA :: else -> skip fi;
       if
       :: (STEPS & 2) && !CLOCK_READINGS -> cvoid = 1
       :: (STEPS & 2) && CLOCK_READINGS ->
          /* 90 s: detected unless an earlier backward step brings the gap since boot back
           * within 60 s; then it fakes clock evidence like a small step */
          woff = woff + 3; cvoid = (woff > TDET || woff < -TDET); stepped = 1
       :: (STEPS & 4) -> skip
       fi;
       o = 0;
       printf("[clock] big forward step; clock void: %d (offset since boot %d x 30 s)\n", cvoid, woff) }
  od
}

/* SIGKILL: any actor, at any step, paused or not: it stops forever. */
/* A stopped process can always be killed (that is how a user ends a stop for good). */
#define CANKILL(a) ((a) < NACT && !dead[a] && !done[a] && (nkill < MAXKILL || paused[a]) && \
  !(LIVE && ((a) == 0 || (a) >= NA)))
#define KILL(a) dead[a] = 1; nkill++; printf("[killer] SIGKILL pid %d\n", a); mine[a] = 0; \
  if :: rmlock == (a) + 1 -> rmlock = 0 :: else -> skip fi; \
  if :: paused[a] -> paused[a] = 0; npaused-- :: else -> skip fi; \
  if \
  :: holding[a] && RUN_SPLIT && FLAV(a) == RUN -> orphan[a] = 1; \
     printf("[killer] pid %d was run: its command runs on until the shim kills its session\n", a) \
  :: holding[a] && !(RUN_SPLIT && FLAV(a) == RUN) -> holding[a] = 0; nholders-- \
  :: else -> skip \
  fi

active proctype Killer() {
end_killer:
  do
  :: atomic { CANKILL(0) -> KILL(0) }
  :: atomic { CANKILL(1) -> KILL(1) }
  :: atomic { CANKILL(2) -> KILL(2) }
  :: atomic { CANKILL(3) -> KILL(3) }
  :: atomic { CANKILL(4) -> KILL(4) }
  od
}

#if RUN_SPLIT
/* `run`'s shim (src/cli/run.cc shim_main): it leads the command's session and has
 * PR_SET_PDEATHSIG; when run dies the kernel queues SIGUSR1 to it, and once it is scheduled
 * it kills every process of the session (kill_session: /proc scanned, SIGKILL through a
 * pidfd) and itself. An asynchronous step: any step of another actor may come first. */
active proctype Shim() {
end_shim:
  do
  :: atomic { orphan[0] -> orphan[0] = 0; holding[0] = 0; nholders--; printf("[shim] run (pid 0) died: SIGKILL its session; its command ends\n") }
  :: atomic { orphan[1] -> orphan[1] = 0; holding[1] = 0; nholders--; printf("[shim] run (pid 1) died: SIGKILL its session; its command ends\n") }
  :: atomic { orphan[2] -> orphan[2] = 0; holding[2] = 0; nholders--; printf("[shim] run (pid 2) died: SIGKILL its session; its command ends\n") }
  od
}
#endif

/* SIGSTOP/SIGCONT (or a debugger, or a cgroup freeze): a guard holder, or with PAUSE_WRITE a
 * writer of a pid-less candidate, stops between two of its steps and is visible as paused.
 * With PAUSE 1 it resumes only while its guard (its candidate) is younger than the guard
 * age; after that only death ends the stop. */
#define HOLDS_GUARD(a) (mguard[a] != 0 && mguard[a] == gid)
#define WRITING(a) ((a) < NA && PAUSE_WRITE && cand[a] != 0 && !wr[cand[a]] && loc[cand[a]] == CAND)
#define CANPAUSE(a) ((a) < NACT && PAUSE > 0 && npause < MAXPAUSE && RUNNING(a) && (HOLDS_GUARD(a) || WRITING(a)))
#define CANRESUME(a) ((a) < NACT && paused[a] && (PAUSE == 2 || \
  (!(HOLDS_GUARD(a) && gage >= GA) && !(WRITING(a) && age[cand[a]] >= GA))))

active proctype Pauser() {
end_pauser:
  do
  :: atomic { CANPAUSE(0) -> paused[0] = 1; npaused++; npause++; printf("[pauser] SIGSTOP pid 0\n") }
  :: atomic { CANPAUSE(1) -> paused[1] = 1; npaused++; npause++; printf("[pauser] SIGSTOP pid 1\n") }
  :: atomic { CANPAUSE(2) -> paused[2] = 1; npaused++; npause++; printf("[pauser] SIGSTOP pid 2\n") }
  :: atomic { CANPAUSE(3) -> paused[3] = 1; npaused++; npause++; printf("[pauser] SIGSTOP pid 3\n") }
  :: atomic { CANRESUME(0) -> paused[0] = 0; npaused--; printf("[pauser] SIGCONT pid 0\n") }
  :: atomic { CANRESUME(1) -> paused[1] = 0; npaused--; printf("[pauser] SIGCONT pid 1\n") }
  :: atomic { CANRESUME(2) -> paused[2] = 0; npaused--; printf("[pauser] SIGCONT pid 2\n") }
  :: atomic { CANRESUME(3) -> paused[3] = 0; npaused--; printf("[pauser] SIGCONT pid 3\n") }
  od
}

/* The runbook's "Remove this lock directory manually", done without checking (DISPLACE). */
active proctype Human() {
  byte t;
  if
  :: DISPLACE ->
end_human:
     atomic { lockobj != 0 -> t = lockobj; gone(t); lockobj = 0; printf("[human] rm -r <lock> (entry %d)\n", t) }
  :: else -> skip
  fi
}

init {
  byte o;
  atomic {
    printf("[init] pids 0..%d acquire (flavours %d %d %d: 0 Apnea 0.2.2, 1 apnea-locks run, 2 writer of a malformed record); pids %d..%d run apnea-locks reclaim (--force: %d); pid %d is the final reclaim --force; entry 0 is <lock>.reclaim, entries 1..%d candidates that may become the lock and tombstones; %d is the initial dead lock\n",
           NA - 1, FLAV0, FLAV1, FLAV2, NA, NACT - 1, FORCE, SWEEPER, MAXO - 1, GOBJ);
    if
    :: INIT >= 1 -> loc[GOBJ] = LOCK; wr[GOBJ] = 1; age[GOBJ] = GRACE; lockobj = GOBJ
    :: else -> skip
    fi;
    if
    :: INIT >= 2 -> gseq++; gid = gseq; guard = (GUARD_REUSE -> 1 : gseq); gholder = GHOST; gage = GA
    :: else -> skip
    fi;
    if :: NA >= 1 -> run Acquirer(0, FLAV0) :: else -> skip fi;
    if :: NA >= 2 -> run Acquirer(1, FLAV1) :: else -> skip fi;
    if :: NA >= 3 -> run Acquirer(2, FLAV2) :: else -> skip fi;
    if :: NR >= 1 -> run Reclaim(NA, FORCE, 0) :: else -> skip fi;
    if :: NR >= 2 -> run Reclaim(NA + 1, FORCE, 0) :: else -> skip fi
  }
  /* Once every actor has finished (crashed, or ended; none paused), the final sweep. */
end_wait:
  atomic { CLEANUP && ALLDONE ->
    /* the user waits --guard-age: every age reaches it */
    o = 1;
    do
    :: o <= MAXO -> age[o] = GA; o++
    :: o > MAXO -> break
    od;
    if :: guard != 0 -> gage = GA :: else -> skip fi;
    run Reclaim(SWEEPER, 1, 1) }
}

/* ---------------------------------------------------------------- liveness (LIVE) */
/* Checked by pan -a -f (weak fairness: a process that can always move eventually moves) with
 * -N naming one claim; each claim accepts the runs that break its property. */
#if LIVE
#define DEAD_LOCK (lockobj != 0 && !ALIVE(WRITER(lockobj)))
/* L1: a dead owner's lock is eventually removed: [] (DEAD_LOCK -> <> !DEAD_LOCK); its
 * negation <> [] DEAD_LOCK. */
never L1 {
T0_init:
  do
  :: (DEAD_LOCK) -> goto accept_S1
  :: (1) -> goto T0_init
  od;
accept_S1:
  do
  :: (DEAD_LOCK) -> printf("MODEL L1 violated: a dead owner's lock stays for ever\n"); goto accept_S1
  od
}
/* L2: an Apnea that keeps trying eventually acquires once the live holders stop: <> acquired0;
 * its negation [] !acquired0. (The other acquirers stop: they have a bounded number of
 * attempts, or are killed.) */
never L2 {
accept_init:
  do
  :: (!acquired0) -> printf("MODEL L2 violated: acquirer 0 never acquires\n"); goto accept_init
  od
}
#endif

