/*
 * A probe after a park, one key, across replicas, as Promela.
 * docs/model.md (A probe at a time) says what is modelled, what is
 * abstracted, and what each assertion means. model/check.sh runs it (and
 * the broken variants, which must fail).
 *
 * Actors: replicas 0..N-1 (a Supervisor and its Store each), the ledger S,
 * an operator. One process runs every actor: each alternative of the main
 * loop is one atomic step of one actor.
 *
 * Time is a token: S's probe slot is due (the key's next-probe time has
 * passed) or not; a tick makes it due, and a granted probe takes it (the
 * claim moves the next-probe time forward: a lease). A lease is the time
 * from a grant to the next tick.
 *
 * Variants (-D): BROKEN_LEASE (a claim grants the probe without moving the
 * next-probe time), BROKEN_PROBE_NOCLAIM (the replica whose healthy step
 * resumed the key announces from the step's verdict, without the claim:
 * the others claim the version they learn and announce it too),
 * BROKEN_HEALTHY_ANY (the healthy step names no park: it resumes the key
 * if it is parked and a probe of it was claimed, whichever park that is),
 * BROKEN_RACE (a healthy step that finds the key resumed already answers
 * that it resumed it, and its replica announces the resume),
 * BROKEN_PROBE_STEPCLAIM (the healthy step takes the claim of its resume
 * for its caller, which announces from the step's verdict: the others'
 * claims lose, and if the caller dies before the reply nobody announces).
 * Each must be caught.
 */

#ifndef N
#define N 2		/* replicas */
#endif
#ifndef PARKS
#define PARKS 2		/* parks, all replicas together */
#endif
#ifndef OPS
#define OPS 1		/* operator resumes */
#endif
#ifndef DEATHS
#define DEATHS 1	/* replicas that die */
#endif
#define MAXV 7		/* versions (asserted never exceeded) */

/* a replica's run of the key */
#define NONE 0
#define RUN 1		/* a run of the unparked key, or a probe that became healthy */
#define PROBE 2		/* a probe run, not yet healthy */

/* transitions */
#define PARK 1
#define RESUME 2

/* ---- S ---- */
bit sP;			/* parked (the park's version is ver) */
byte ver;		/* version of the key's last transition */
bit probes;		/* a probe of this park was claimed (probes > 0) */
bit due;		/* the next probe may start (probe != 0 && now >= probe) */
byte claim[MAXV+1];	/* claim[v]: 0, or the winner + 1 */

/* ---- network ---- */
byte hq[N];		/* replica r's healthy step on its way: the park version it names, 0 none */
byte oq;		/* the operator's resume on its way: the version it names, 0 none */

/* ---- replicas ---- */
bit alive[N];
byte st[N];		/* NONE, RUN, PROBE */
byte pv[N];		/* the park its probe was granted for */
byte mV[N];		/* the version it last learned */
byte pc[N];		/* pending claims: bit v for version v */

/* ---- budgets of the run ---- */
byte parks = PARKS, ops = OPS, deaths = DEATHS;
bit ph;			/* 0: failures may happen; 1: settle */

/* ---- ghosts (checked, never read by the protocol) ---- */
byte kind[MAXV+1];	/* PARK or RESUME */
byte ofp[MAXV+1];	/* a resume: the park it cleared */
byte lrn[MAXV+1];	/* the replicas that learned it: bit r */
bit ann[MAXV+1];	/* announced */
bit annRes[MAXV+1];	/* a resume of park p announced */
bit inLease[N];		/* its probe was granted in the current lease */

/* a resume of park p is announced */
inline announceRes(p) {
	assert(!annRes[p]);	/* P6: a park's resume announced once */
	annRes[p] = 1
}

inline announce(v) {
	assert(!ann[v]);	/* P6: each transition announced at most once */
	ann[v] = 1;
	if
	:: kind[v] == RESUME -> announceRes(ofp[v])
	:: else
	fi
}

inline transition(k) {
	assert(ver < MAXV);
	ver++;
	kind[ver] = k
}

/* replica r learns version v (a reply, a notice, a lookup): it claims it */
inline learn(v) {
	if
	:: v > mV[r] -> mV[r] = v; pc[r] = pc[r] | (1 << v); lrn[v] = lrn[v] | (1 << r)
	:: else
	fi
}

/* the run of replica r ends in a failure: judge */
inline fail() {
	if
	:: !sP && parks > 0 ->	/* its budget is spent: park */
		parks--;
		transition(PARK); sP = 1; probes = 0; due = 0;
		learn(ver)
	:: else		/* parked: nothing counted; or restarted within its budget */
	fi;
	st[r] = NONE; pv[r] = 0
}

/* S applies the resume of park p (a probe's healthy step, or the operator's) */
inline resume(p) {
	transition(RESUME); ofp[ver] = p;
	sP = 0; probes = 0; due = 0
}

#define REPLICA(R) \
	/* start a run of the unparked key */ \
	:: atomic { alive[R] && st[R] == NONE && !sP -> st[R] = RUN } \
	/* a run (a probe's too) fails */ \
	:: atomic { alive[R] && st[R] != NONE && !ph && (sP || parks > 0) -> r = R; fail() } \
	/* claim the probe of the parked key: one atomic ledger step */ \
	:: atomic { alive[R] && st[R] == NONE && sP && due -> \
		r = R; \
		PROBE_MOVES_LEASE; probes = 1; \
		i = 0; \
		do \
		:: i < N -> assert(i == R || !inLease[i] || st[i] != PROBE); i++	/* P5 */ \
		:: else -> break \
		od; \
		inLease[R] = 1; st[R] = PROBE; pv[R] = ver } \
	/* the probe's run becomes healthy: the healthy step is sent */ \
	:: atomic { alive[R] && st[R] == PROBE && hq[R] == 0 -> hq[R] = pv[R]; st[R] = RUN } \
	/* it learns the key's last transition (a notice, a lookup) */ \
	:: atomic { alive[R] && mV[R] < ver -> r = R; learn(ver) } \
	/* it claims a version it learned; the winner announces */ \
	:: atomic { alive[R] && pc[R] != 0 -> \
		r = R; v = 1; \
		do \
		:: (pc[r] & (1 << v)) -> break \
		:: else -> v++ \
		od; \
		pc[r] = pc[r] & ~(1 << v); \
		if \
		:: claim[v] == 0 -> claim[v] = r + 1 \
		:: else \
		fi; \
		if \
		:: claim[v] == r + 1 -> announce(v) \
		:: else \
		fi } \
	/* it dies (in a probe, with a claim or a reply pending: all are lost) */ \
	:: atomic { alive[R] && !ph && deaths > 0 -> \
		deaths--; alive[R] = 0; st[R] = NONE; pv[R] = 0; pc[R] = 0; inLease[R] = 0 } \
	/* S applies its healthy step (late, perhaps: the request waited) */ \
	:: atomic { hq[R] != 0 -> \
		r = R; \
		if \
		:: HEALTHY_RESUMES(hq[R]) -> \
			assert(ver == hq[R]);	/* P7: a probe's resume clears the park it probed */ \
			resume(hq[R]); \
			STEP_CLAIM; \
			if \
			:: alive[R] -> \
				BROKEN_ANNOUNCE; \
				learn(ver)	/* the reply */ \
			:: else \
			fi \
		:: else	/* resumed or parked anew since: nothing */ \
			BROKEN_RACE_ANNOUNCE(hq[R]) \
		fi; \
		hq[R] = 0 }

#ifdef BROKEN_LEASE
#define PROBE_MOVES_LEASE skip
#else
#define PROBE_MOVES_LEASE due = 0
#endif
#ifdef BROKEN_HEALTHY_ANY
#define HEALTHY_RESUMES(p) (sP && probes)
#else
#define HEALTHY_RESUMES(p) (sP && probes && ver == (p))
#endif
#ifdef BROKEN_RACE
#define BROKEN_RACE_ANNOUNCE(p) ; if :: !sP && alive[r] -> announceRes(p) :: else fi
#else
#define BROKEN_RACE_ANNOUNCE(p)
#endif
#ifdef BROKEN_PROBE_STEPCLAIM
#define STEP_CLAIM claim[ver] = r + 1
#else
#define STEP_CLAIM skip
#endif
#if defined(BROKEN_PROBE_NOCLAIM) || defined(BROKEN_PROBE_STEPCLAIM)
#define BROKEN_ANNOUNCE announce(ver); mV[r] = ver
#else
#define BROKEN_ANNOUNCE skip
#endif

hidden byte r, i, v;	/* temporaries of one step: not state */

init {
	i = 0;
	do
	:: i < N -> alive[i] = 1; i++
	:: else -> break
	od;

	do
	REPLICA(0)
	REPLICA(1)
#if N > 2
	REPLICA(2)
#endif

	/* the probe's time comes: a new lease */
	:: atomic { sP && !due ->
		due = 1;
		i = 0;
		do
		:: i < N -> inLease[i] = 0; i++
		:: else -> break
		od }

	/* the operator reads the park and resumes it (the request may be late) */
	:: atomic { !ph && ops > 0 && sP && oq == 0 -> ops--; oq = ver }
	:: atomic { oq != 0 ->
		if
		:: sP && ver == oq -> resume(oq)
		:: else
		fi;
		oq = 0 }

	/* the failures end; the replicas settle */
	:: atomic { !ph -> ph = 1 }
	:: atomic { timeout ->
		assert(ph);
		/* P6 at least once: each transition a live replica learned was
		 * announced (one that only a dead replica learned is not) */
		i = 1;
		do
		:: i <= MAXV ->
			v = 0; r = 0;
			do
			:: r < N -> if :: alive[r] && (lrn[i] & (1 << r)) -> v = 1 :: else fi; r++
			:: else -> break
			od;
			assert(!v || ann[i]); i++
		:: else -> break
		od;
		break }
	od
}
