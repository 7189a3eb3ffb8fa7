// The agent's side of a reboot turn: ask (status.turnRequest), wait for the record in the
// Cluster's status.rebootTurns, hold it, give it back; and the heartbeat while alive.
export { findTurn, takenBackOf, turnRequestFor } from "./turn.js";
export { startHeartbeat, type HeartbeatLoop } from "./heartbeat.js";
