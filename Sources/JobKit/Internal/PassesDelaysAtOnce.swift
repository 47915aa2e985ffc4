/// A queue on which delayed work runs at once, with no time passing
/// (`ImmediateQueue`): work that schedules itself again after a delay, to
/// try something later, would run again and again without end there, so
/// it asks this first.
package protocol PassesDelaysAtOnce: JobQueue {}
