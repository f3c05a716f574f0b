// Package eviction will hold replproxy's memory accountant: every category of
// memory counted by the usable size of its allocations, Redis 7's formulas for
// what is not counted for eviction, and the maxmemory decision. Nothing is
// built here yet.
package eviction
