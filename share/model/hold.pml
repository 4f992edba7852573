/*
 * A hold on a shared cause, one cause, across replicas, as Promela.
 * docs/model.md (A hold per cause) says what is modelled, what is
 * abstracted, and what each assertion means. model/check.sh runs it (and
 * the broken variants, which must fail).
 *
 * Actors: keys 0..K-1, each run by its own replica (a Supervisor and its
 * Store), and the ledger S. One process runs every actor: each alternative
 * of the main loop is one atomic step of one actor.
 *
 * Time is a token: the cause's probe slot is due (its next-probe time has
 * passed) or not; a tick makes it due, and a granted probe takes it (the
 * grant moves the next-probe time forward: a lease). A lease is the time
 * from a grant to the next tick. The window is longer than the run: a
 * failure noted stays noted until a release clears the cause.
 *
 * Variants (-D): BROKEN_HOLD_LEASE (a held key becomes the prober without
 * moving the next-probe time), BROKEN_HELD_EVERY (fleet.cause_held is
 * announced by every replica whose step answered held when it had not
 * seen the cause held, not by the step that flipped it), BROKEN_RELEASED_EVERY
 * (fleet.cause_released is announced by every replica whose held key is
 * released, not by the step that released the cause), BROKEN_PROBER_WAIT
 * (a held key becomes the prober only when no prober is set: a prober
 * whose replica died is never replaced). Each must be caught.
 */

#ifndef K
#define K 3		/* keys, one replica each */
#endif
#ifndef KEYS
#define KEYS 2		/* distinct keys failing with the cause that start a hold */
#endif
#ifndef FAILS
#define FAILS 4		/* failures, all keys together */
#endif
#ifndef DEATHS
#define DEATHS 1	/* replicas that die */
#endif
#ifndef LOSSES
#define LOSSES 1	/* replies lost (the step applied, its caller never hears) */
#endif
#define MAXE 4		/* holds (asserted never exceeded) */

/* a key's run */
#define NONE 0		/* not running: restarting, or held */
#define RUN 1		/* a run (a probe that became healthy too) */
#define PROBE 2		/* the cause's probe, not yet healthy */

/* ---- S: the cause's entry in the fleet's table, and each key's hold ---- */
bit held;		/* the cause is held */
byte recent;		/* the distinct keys noted failing with it: bit k */
bit due;		/* the next probe may start (now >= probe) */
byte prober;		/* the key that is its probe + 1; 0 none */
byte kh;		/* the keys held for it: bit k */

/* ---- replicas ---- */
bit alive[K];
byte st[K];		/* NONE, RUN, PROBE */
bit saw[K];		/* BROKEN_*_EVERY: it saw the cause held, and no release since */

/* ---- budgets of the run ---- */
byte fails = FAILS, deaths = DEATHS, losses = LOSSES;
bit ph;			/* 0: the cause fails runs; 1: it is healthy again (settle) */

/* ---- ghosts (checked, never read by the protocol) ---- */
byte ep;		/* holds so far: the current one is ep */
bit annH[MAXE+1];	/* hold e announced (fleet.cause_held) */
bit annR[MAXE+1];	/* its release announced (fleet.cause_released) */
bit lostH[MAXE+1];	/* the reply of the step that held it was lost */
bit lostR[MAXE+1];	/* the reply of the step that released it was lost */
bit relE[MAXE+1];	/* hold e was released */
bit inLease[K];		/* its probe was granted in the current lease */

inline announceHeld() {
	assert(!annH[ep]);	/* P9: fleet.cause_held at most once a hold */
	annH[ep] = 1
}

inline announceReleased() {
	assert(!annR[ep]);	/* P9: fleet.cause_released at most once a hold */
	annR[ep] = 1
}

/* the number of keys in recent */
inline count() {
	n = 0; i = 0;
	do
	:: i < K -> if :: (recent & (1 << i)) -> n++ :: else fi; i++
	:: else -> break
	od
}

/* the caller's reply is lost (1) or not (0) */
inline lose() {
	if
	:: losses > 0 -> losses--; l = 1
	:: l = 0
	fi
}

#ifdef BROKEN_HELD_EVERY
#define HELD_FLIP skip
#define HELD_EVERY if :: !l && !saw[k] -> saw[k] = 1; announceHeld() :: else fi
#else
#define HELD_FLIP announceHeld()
#define HELD_EVERY skip
#endif
#ifdef BROKEN_RELEASED_EVERY
#define RELEASED_FLIP announceReleased()
#define RELEASED_EVERY announceReleased()
#else
#define RELEASED_FLIP announceReleased()
#define RELEASED_EVERY skip
#endif
#ifdef BROKEN_HOLD_LEASE
#define PROBE_MOVES_LEASE skip
#else
#define PROBE_MOVES_LEASE due = 0
#endif
#ifdef BROKEN_PROBER_WAIT
#define MAY_PROBE (prober == 0 && due)
#else
#define MAY_PROBE (due)
#endif

/* S judges key k's failure with the cause (one atomic step), and its
 * replica takes the reply */
inline judge() {
	recent = recent | (1 << k);
	count();
	if
	:: held || n >= KEYS ->
		lose();
		if
		:: !held ->	/* this step flips the cause: its verdict carries CauseHeld */
			assert(ep < MAXE);
			held = 1; due = 0; ep++;
			if
			:: l -> lostH[ep] = 1
			:: else -> HELD_FLIP
			fi
		:: else
		fi;
		HELD_EVERY;
		kh = kh | (1 << k);	/* held: nothing counted, no park */
		if
		:: prober == k + 1 -> prober = 0	/* its probe failed */
		:: else
		fi
	:: else	/* judged as usual: restarted within its budget */
	fi;
	st[k] = NONE
}

#define KEY(X) \
	/* a restart of a key not held */ \
	:: atomic { alive[X] && st[X] == NONE && !(kh & (1 << X)) -> st[X] = RUN } \
	/* its run (a probe's too) fails with the cause */ \
	:: atomic { alive[X] && st[X] != NONE && !ph && fails > 0 -> fails--; k = X; judge() } \
	/* the Proceed of its held restart: released, or the probe */ \
	:: atomic { alive[X] && st[X] == NONE && (kh & (1 << X)) && !held -> \
		k = X; kh = kh & ~(1 << X); st[X] = RUN; saw[X] = 0; \
		RELEASED_EVERY } \
	:: atomic { alive[X] && st[X] == NONE && (kh & (1 << X)) && held && MAY_PROBE -> \
		prober = X + 1; PROBE_MOVES_LEASE; \
		i = 0; \
		do \
		:: i < K -> assert(i == X || !inLease[i] || st[i] != PROBE); i++	/* P8 */ \
		:: else -> break \
		od; \
		inLease[X] = 1; kh = kh & ~(1 << X); st[X] = PROBE } \
	/* the probe's run becomes healthy: the healthy step */ \
	:: atomic { alive[X] && st[X] == PROBE -> \
		k = X; st[X] = RUN; \
		if \
		:: held && prober == X + 1 ->	/* release: its verdict carries CauseReleased */ \
			held = 0; recent = 0; prober = 0; due = 0; relE[ep] = 1; \
			lose(); \
			if \
			:: l -> lostR[ep] = 1 \
			:: else -> RELEASED_FLIP \
			fi \
		:: else \
		fi } \
	/* its replica dies */ \
	:: atomic { alive[X] && !ph && deaths > 0 -> \
		deaths--; alive[X] = 0; st[X] = NONE; inLease[X] = 0 }

hidden byte k, i, n, l;	/* temporaries of one step: not state */

init {
	i = 0;
	do
	:: i < K -> alive[i] = 1; st[i] = RUN; i++
	:: else -> break
	od;

	do
	KEY(0)
	KEY(1)
#if K > 2
	KEY(2)
#endif
#if K > 3
	KEY(3)
#endif

	/* the cause's probe time comes: a new lease */
	:: atomic { held && !due ->
		due = 1;
		i = 0;
		do
		:: i < K -> inLease[i] = 0; i++
		:: else -> break
		od }

	/* the cause is healthy again; no more deaths: the keys settle */
	:: atomic { !ph -> ph = 1 }
	:: atomic { timeout ->
		assert(ph);
		/* P10: no live key is held (a hold is released once its cause is
		 * healthy, whichever replica died) */
		i = 0;
		do
		:: i < K -> assert(!alive[i] || !(kh & (1 << i))); i++
		:: else -> break
		od;
		/* P9 at least once: each hold and each release was announced,
		 * unless the reply of the step that made it was lost */
		i = 1;
		do
		:: i <= ep ->
			assert(annH[i] || lostH[i]);
			assert(!relE[i] || annR[i] || lostR[i]);
			i++
		:: else -> break
		od;
		break }
	od
}
