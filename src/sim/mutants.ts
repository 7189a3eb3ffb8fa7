// The safety rules broken by hand, one at a time, to show the simulation notices each
// (--mutants). Each is a seam at the boundary of the real code, named here and nowhere else:
//   unconditioned  the operator's turn write sent without the resourceVersion it read
//                  (last writer wins), as operator-stale.test.ts breaks it;
//   leader         every Machine shown to the operator's decide as a Worker (the leader rule
//                  has nothing to act on);
//   grace          the operator's startGraceSeconds set to 0;
//   arm-first      the trial armed before the slot is read back (act.ts's order reversed);
//   bootid         the agent shown its Node with this boot's bootID whatever the Node says
//                  (rejoin.ts's bootID comparison has nothing to refuse);
//   recall-blind, taken-blind, revert-forgotten  the release rules' (blind.ts says how);
//   never-rejoins  an agent whose certificate lapsed never falls back to the bootstrap
//                  credential (issue 38's 2.7 before its fix): it stays locked out.
export const MUTANTS = [
  "unconditioned",
  "leader",
  "grace",
  "arm-first",
  "bootid",
  "recall-blind",
  "taken-blind",
  "revert-forgotten",
  "never-rejoins",
] as const;
export type Mutant = (typeof MUTANTS)[number];
