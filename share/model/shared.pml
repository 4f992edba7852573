/*
 * crashloop's versioned shared-state protocol, one key, as Promela.
 * docs/model.md says what is modelled, what is abstracted, and what each
 * assertion means. model/check.sh runs it (and the broken variants, which
 * must fail).
 *
 * Actors: replicas 0..N-1 (a Supervisor and its Store each), the server S,
 * an operator OP (an unopened Store). One process runs every actor: each
 * alternative of the main loop is one atomic step of one actor, so the
 * interleavings are exactly the orders of those steps.
 *
 * Network: every request sits in a slot of a bag until S takes it (in any
 * order: late delivery, a paused server applying its queue) or the network
 * drops it; a caller may give up at any moment (timeout: its reply, when S
 * makes one later, is dropped: a lost reply); notices are at most once
 * (one slot per replica, a newer notice overwrites an older one, and a
 * notice may be dropped).
 *
 * A replica finds a loss of S's state at a call (state_lost), or at any
 * moment by its periodic check of the epoch, or at a notice of S's new
 * epoch (notices carry their epoch: one of another epoch is held until the
 * replica adopted S's, or dropped when that epoch is gone).
 *
 * Variants (-D): BROKEN_RESUME (today's blind resume: any park is cleared),
 * BROKEN_RESTORE (a write-back ignores seen), BROKEN_NOWB (no write-back
 * after state loss), BROKEN_NOCLAIM (the judge's replica announces its park
 * without a claim), BROKEN_NOTICE (notices without their epoch: a notice's
 * version is compared with the mirror's whatever the epoch). Each must be
 * caught.
 */

#ifndef N
#define N 2		/* replicas */
#endif
#ifndef B
#define B 1		/* budget: respawns per window */
#endif
#ifndef JUDGES
#define JUDGES 3	/* judge calls, all replicas together */
#endif
#ifndef OPS
#define OPS 2		/* operator actions: resume via a replica, resume or forget directly */
#endif
#ifndef LOSSES
#define LOSSES 1	/* requests or notices the network drops */
#endif
#ifndef TIMEOUTS
#define TIMEOUTS 2	/* calls that give up (their reply lost or late) */
#endif
#ifndef STATELOSS
#define STATELOSS 1	/* losses of the server's state */
#endif

#define OP N		/* the operator's client index */
#ifdef NOFORGET
#define FORGETS 0	/* the operator resumes only */
#else
#define FORGETS 1
#endif
#define NC (N+1)	/* clients */
#define SLOTS 2		/* outstanding requests per replica; the operator has one */
#define NSLOT (N*SLOTS+1)
#define MAXV 7		/* versions per epoch (asserted never exceeded) */
#define NPID (16+N)	/* transition ids: G(e,v) for e in 1..2, then one alone park per replica */
#define G(e,v) (((e)-1)*8+(v))
#define ALONE(r) (16+(r))

/* request kinds */
#define JUDGE 1
#define LOOKUP 2
#define RESUME 3
#define FORGET 4
#define RESTORE 5
#define CLAIM 6
#define HELLO 7

/* reply results */
#define OK 1		/* applied (or answered) */
#define LOST 2		/* state_lost: the epoch differs or S has none */
#define NA 3		/* not applied: the reply carries S's state */

/* ---- server S ---- */
byte sE = 1;		/* epoch, 0 = none (state lost) */
byte nextE = 2;		/* the next epoch SET NX makes (stands for a random id) */
byte seq, ver;		/* counter; version of the key's last transition */
bit sP;			/* parked (then the park's version is ver) */
byte sG;		/* grants in the budget window */
byte claim[MAXV+1];	/* claim[v]: 0, the winner + 1, or WB */
#define WB 9		/* the claim a write-back takes: no claimer's value, not even its writer's */

/* ---- network ---- */
byte qk[NSLOT], qe[NSLOT], qv[NSLOT], qp[NSLOT];	/* request: kind, epoch, version/seen, park id */
byte pk[NC], pe[NC], pv[NC];	/* reply to client c: result, epoch, ver */
bit pp[NC], pg[NC];		/* reply: parked, granted/won */
byte nk[N], ne[N], nv[N];	/* notice slot of replica r: full, epoch, ver */
bit np[N];			/* notice: parked */

/* ---- clients ---- */
bit cw[NC];		/* waiting for a reply */
byte cs[NC];		/* the slot it waits on */
byte ck[NC];		/* the kind of that call */
byte cv[NC];		/* its version argument (claims) */

/* replicas */
byte rE[N];		/* the epoch it knows */
byte mV[N];		/* mirror: version it last learned (in rE) */
bit mP[N];		/* mirror: parked (at version mV) */
byte pc[N];		/* pending claims: bit v for version v of rE */
byte kp[N], ks[N];	/* a park to write back (id, 0 none) and the version seen */
bit nh[N];		/* needs hello: saw state_lost */
bit usedAlone[N];	/* its one alone park is spent (bound) */
byte aG[N];		/* grants decided alone in its own window */

bit synced[N];		/* settle phase: a lookup answered since S last changed */


/* ---- budgets of the run ---- */
byte jl = JUDGES;	/* judge calls left, all replicas */
byte ops = OPS, losses = LOSSES, slosses = STATELOSS, timeouts = TIMEOUTS;
bit ph;			/* 0: faults may happen; 1: settle (no faults, no new work) */

/* ---- ghosts (checked, never read by the protocol) ---- */
byte pidOf[16];		/* the identity of transition G(e,v): its own, or the park a write-back restored */
bit ann[NPID];		/* announced */
bit learned[NPID];	/* some replica learned it (or decided it alone) */
byte kn[N];		/* the park replica r knows stands (id; 0: none, or it learned a resume or forget) */
bit lostc[NPID];	/* a replica's claim of it was pending when its epoch was lost */
byte wresp;		/* respawns granted in the current window (server and alone) */
bit walone;		/* some replica decided alone in this window */

/* announce transition id x (P2: at most once) */
inline announce(x) {
	assert(!ann[x]);
	ann[x] = 1
}

inline publish() {
	r = 0;
	do
	:: r < N -> nk[r] = 1; ne[r] = sE; nv[r] = ver; np[r] = sP; synced[r] = 0; r++
	:: else -> break
	od
}

/* a new transition on S: the next version; id 0: a new identity, else the
 * park a write-back restores (inline arguments are text: id must not read seq) */
inline transition(id) {
	assert(seq < MAXV);
	seq++;
	ver = seq;
	if
	:: id == 0 -> pidOf[G(sE, ver)] = G(sE, ver)
	:: else -> pidOf[G(sE, ver)] = id
	fi
}

/* the window restarts (resume, forget, state loss) */
inline newwindow() {
	sG = 0; wresp = 0; walone = 0
}

#ifdef BROKEN_NOTICE
#define LEARN_EPOCH(e) (1)	/* the epoch not compared: a notice's version read as the current epoch's */
#else
#define LEARN_EPOCH(e) ((e) == rE[r])
#endif

/* replica r learns S's state (e, v, parked): a version not newer than the
 * mirror's is stale and ignored; a newer one is claimed */
inline learn(e, v, parked) {
	if
	:: LEARN_EPOCH(e) && v > mV[r] ->
		mV[r] = v; mP[r] = parked;
		if
		:: parked -> kn[r] = pidOf[G(e, v)]
		:: else -> kn[r] = 0
		fi;
		pc[r] = pc[r] | (1 << v);
		learned[pidOf[G(e, v)]] = 1;
		if
		:: !parked -> aG[r] = 0
		:: else
		fi
	:: else
	fi
}

/* send a request of kind k from replica r on its first free slot */
inline send(k, e, v, p) {
	if
	:: qk[r*SLOTS] == 0 -> i = r*SLOTS
	:: else -> i = r*SLOTS + 1
	fi;
	qk[i] = k; qe[i] = e; qv[i] = v; qp[i] = p;
	cw[r] = 1; cs[r] = i; ck[r] = k; cv[r] = v
}
#define FREE(r) (qk[(r)*SLOTS] == 0 || qk[(r)*SLOTS+1] == 0)
/* a notice replica r takes now: of its epoch (BROKEN_NOTICE: of any) */
#ifdef BROKEN_NOTICE
#define NOTICE_OK(r) (1)
#else
#define NOTICE_OK(r) (ne[r] == rE[r])
#endif
#define IDLE(r) (!cw[r] && FREE(r))

/* replica r's lowest pending claim */
inline lowest() {
	v = 1;
	do
	:: (pc[r] & (1 << v)) -> break
	:: else -> v++
	od
}

/* replica r decides alone (its call timed out) */
inline alone() {
	walone = 1;
	if
	:: cv[r] == 0 && aG[r] < B -> aG[r]++; wresp++
	:: else ->
		if
		:: !usedAlone[r] ->
			usedAlone[r] = 1;
			kp[r] = ALONE(r); ks[r] = mV[r];
			learned[ALONE(r)] = 1; kn[r] = ALONE(r);
			announce(ALONE(r))	/* at once, locally */
		:: else	/* refused, bound of the model */
		fi
	fi;
	assert(aG[r] <= B);
	assert(wresp <= (N+1)*B)	/* P4 across an outage */
}

/* S takes request slot i of client c */
inline serve() {
	c = i / SLOTS;
	res = OK; g = 0;
	if
	:: qk[i] == HELLO ->
		if
		:: sE == 0 -> sE = nextE; nextE++
		:: else
		fi
	:: else ->
		if
		:: qe[i] != sE || sE == 0 -> res = LOST
		:: else ->
			if
			:: qk[i] == JUDGE ->
				if
				:: sP -> skip	/* refused */
				:: !sP && qv[i] == 0 && sG < B -> sG++; g = 1; wresp++;
					assert(walone || wresp <= B);	/* P4 while S serves */
					assert(wresp <= (N+1)*B)
				:: !sP && (qv[i] == 1 || sG >= B) ->	/* park: no claim in the judge step */
					transition(0); sP = 1; publish()
				fi
			:: qk[i] == LOOKUP -> skip
			:: qk[i] == RESUME ->
#ifdef BROKEN_RESUME
				if
				:: sP ->
#else
				if
				:: sP && ver == qv[i] ->
#endif
					assert(ver == qv[i]);	/* P1 */
					transition(0); sP = 0; newwindow(); publish()
				:: else -> res = NA
				fi
			:: qk[i] == FORGET ->
				if
				:: ver == qv[i] ->
					assert(ver == qv[i]);	/* P1 */
					transition(0); sP = 0; newwindow(); publish()
				:: else -> res = NA
				fi
			:: qk[i] == RESTORE ->
#ifdef BROKEN_RESTORE
				if
				:: true ->
#else
				if
				:: ver == qv[i] ->
#endif
					assert(ver == qv[i]);	/* P1 */
					transition(qp[i]); sP = 1;
					claim[ver] = WB;	/* its writer announced it: every claim of it loses */
					publish()
				:: else -> res = NA
				fi
			:: qk[i] == CLAIM ->
				if
				:: claim[qv[i]] == 0 -> claim[qv[i]] = c + 1
				:: else
				fi;
				g = (claim[qv[i]] == c + 1)
			fi
		fi
	fi;
	/* the reply reaches the caller only while it waits for it */
	if
	:: cw[c] && cs[c] == i ->
		pk[c] = res; pe[c] = sE; pv[c] = ver; pp[c] = sP; pg[c] = g
	:: else
	fi;
	qk[i] = 0; qe[i] = 0; qv[i] = 0; qp[i] = 0
}

/* client x is done with its call: clear it all, so that equal states compare equal */
inline endcall(x) {
	cw[x] = 0; cs[x] = 0; ck[x] = 0; cv[x] = 0;
	pk[x] = 0; pe[x] = 0; pv[x] = 0; pp[x] = 0; pg[x] = 0
}

/* replica r handles the reply to its call */
inline reply() {
	cw[r] = 0;
	if
	:: pk[r] == LOST -> nh[r] = 1
	:: else ->
		if
		:: ck[r] == HELLO ->
			nh[r] = 0;
			if
			:: pe[r] != rE[r] ->	/* S lost its state: a new epoch */
				v = 1;
				do
				:: v <= MAXV ->
					if
					:: (pc[r] & (1 << v)) && !ann[pidOf[G(rE[r], v)]] ->
						lostc[pidOf[G(rE[r], v)]] = 1
					:: else
					fi;
					v++
				:: else -> break
				od;
				pc[r] = 0;
#ifndef BROKEN_NOWB
				if
				:: kp[r] == 0 && mP[r] -> kp[r] = pidOf[G(rE[r], mV[r])]
				:: else
				fi;
#endif
				ks[r] = 0;
				rE[r] = pe[r]; mV[r] = 0; mP[r] = 0; aG[r] = 0
			:: else
			fi
		:: ck[r] == RESTORE && pk[r] == OK ->
			/* written back; the claim was taken in the same step (a
			 * notice may have taught a newer version already) */
			kp[r] = 0;
			if
			:: pv[r] > mV[r] -> mV[r] = pv[r]; mP[r] = 1
			:: else
			fi
		:: ck[r] == RESTORE ->
			/* a newer transition stands: adopt it */
			kp[r] = 0;
			learn(pe[r], pv[r], pp[r]);
			if
			:: mP[r] -> kn[r] = pidOf[G(rE[r], mV[r])]
			:: else -> kn[r] = 0
			fi
		:: ck[r] == CLAIM ->
			pc[r] = pc[r] & ~(1 << cv[r]);
			if
			:: pg[r] -> announce(pidOf[G(rE[r], cv[r])])
			:: else	/* lost: the mirror is already up to date */
			fi
		:: ck[r] == JUDGE && pg[r] -> skip	/* respawn, counted on S */
		:: else ->
			learn(pe[r], pv[r], pp[r]);
#ifdef BROKEN_NOCLAIM
			if
			:: ck[r] == JUDGE && pp[r] && (pc[r] & (1 << pv[r])) ->
				pc[r] = pc[r] & ~(1 << pv[r]);
				announce(pidOf[G(pe[r], pv[r])])
			:: else
			fi;
#endif
			if
			:: ph && ck[r] == LOOKUP -> synced[r] = 1
			:: else
			fi
		fi
	fi;
	endcall(r)
}


/* the steps of replica R, each one atomic alternative of the main loop */
#define REPLICA(R) \
	:: atomic { IDLE(R) && !ph && jl > 0 && !mP[R] && kp[R] == 0 && !nh[R] -> \
		r = R; jl--; \
		if \
		:: v = 0	/* a crash: the budget judges */ \
		:: v = 1	/* a permanent failure: parks */ \
		fi; \
		send(JUDGE, rE[r], v, 0) } \
	:: atomic { IDLE(R) && !nh[R] && ph && !synced[R] -> \
		r = R; send(LOOKUP, rE[r], 0, 0) } \
	:: atomic { IDLE(R) && !nh[R] && pc[R] != 0 -> \
		r = R; lowest(); send(CLAIM, rE[r], v, 0) } \
	:: atomic { IDLE(R) && !nh[R] && kp[R] != 0 -> \
		r = R; send(RESTORE, rE[r], ks[r], kp[r]) } \
	:: atomic { IDLE(R) && nh[R] -> \
		r = R; send(HELLO, 0, 0, 0) } \
	:: atomic { IDLE(R) && !ph && ops > 0 && !nh[R] && mP[R] && kp[R] == 0 -> \
		r = R; ops--; send(RESUME, rE[r], mV[r], 0) } \
	:: atomic { cw[R] && pk[R] != 0 -> r = R; reply() } \
	:: atomic { cw[R] && !ph && timeouts > 0 -> \
		r = R; timeouts--; \
		if \
		:: ck[r] == JUDGE -> alone() \
		:: else \
		fi; \
		endcall(r) } \
	:: atomic { cw[R] && ph && pk[R] == 0 && qk[cs[R]] == 0 -> \
		r = R; \
		if \
		:: ck[r] == JUDGE -> alone() \
		:: else \
		fi; \
		endcall(r) } \
	:: atomic { nk[R] && NOTICE_OK(R) -> r = R; learn(ne[r], nv[r], np[r]); nk[r] = 0; ne[r] = 0; nv[r] = 0; np[r] = 0 } \
	:: atomic { nk[R] && !NOTICE_OK(R) && ne[R] == sE && !nh[R] -> nh[R] = 1 }	/* a notice of the epoch S has now: check it first */ \
	:: atomic { nk[R] && !NOTICE_OK(R) && ne[R] != sE -> nk[R] = 0; ne[R] = 0; nv[R] = 0; np[R] = 0 }	/* of an epoch gone: dropped */ \
	:: atomic { IDLE(R) && !nh[R] && sE != rE[R] -> nh[R] = 1 }	/* the periodic check of the epoch finds a loss */ \
	:: atomic { nk[R] && !ph && losses > 0 -> losses--; nk[R] = 0; ne[R] = 0; nv[R] = 0; np[R] = 0 }

/* S takes request slot I, or the network drops it */
#define SERVE(I) \
	:: atomic { qk[I] != 0 -> i = I; serve() } \
	:: atomic { qk[I] != 0 && !ph && losses > 0 -> \
		losses--; qk[I] = 0; qe[I] = 0; qv[I] = 0; qp[I] = 0 }

hidden byte r, i, c, v, res, g;	/* temporaries of one step: not state */

init {

	r = 0;
	do
	:: r < N -> rE[r] = 1; r++
	:: else -> break
	od;

	do
	/* ---- replicas ---- */
	REPLICA(0)
	REPLICA(1)

	/* ---- operator, directly (an unopened store): its lookup reads S's
	 * state, its resume or forget carries what it read and may be late ---- */
	:: atomic { !ph && ops > 0 && qk[N*SLOTS] == 0 && sE != 0 && (sP || FORGETS) ->
		i = N*SLOTS; ops--;
		if
		:: sP -> qk[i] = RESUME
#ifndef NOFORGET
		:: qk[i] = FORGET
#endif
		fi;
		qe[i] = sE; qv[i] = ver }

	/* ---- server and network ---- */
	SERVE(0)
	SERVE(1)
	SERVE(2)
	SERVE(3)
	SERVE(4)
	:: atomic { !ph && slosses > 0 && sE != 0 ->	/* FLUSHALL, restart without persistence */
		slosses--;
		sE = 0; seq = 0; ver = 0; sP = 0; newwindow();
		i = 1;
		do
		:: i <= MAXV -> claim[i] = 0; i++
		:: else -> break
		od }

	/* ---- the faults end; the replicas settle ---- */
	:: atomic { !ph -> ph = 1 }
	:: atomic { ph &&
		qk[0] == 0 && qk[1] == 0 && qk[2] == 0 && qk[3] == 0 && qk[4] == 0 &&
		!cw[0] && !cw[1] && nk[0] == 0 && nk[1] == 0 &&
		!nh[0] && !nh[1] && pc[0] == 0 && pc[1] == 0 && kp[0] == 0 && kp[1] == 0 &&
		synced[0] && synced[1] ->
		/* P2 at least once: each transition a replica learned was announced,
		 * unless its claim was pending when its epoch was lost: such a claim
		 * cannot be settled (the claims went with S's state, and another
		 * replica may have won it and announced), so at least once does not
		 * hold for it (docs/redis.md, Announcing) */
		i = 0;
		do
		:: i < NPID ->
			assert(!learned[i] || lostc[i] || ann[i]); i++
		:: else -> break
		od;
		/* P3: a park a replica knows (and no resume of it learned) stands on S */
		r = 0;
		do
		:: r < N ->
			assert(!mP[r] || (sP && rE[r] == sE && mV[r] == ver));
			assert(kn[r] == 0 || (sP && rE[r] == sE));
			r++
		:: else -> break
		od;
		break }
	od
}
