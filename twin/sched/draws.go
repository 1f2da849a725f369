package sched

// The random choices that decide a request's fate are hashes of the run's
// seed, the request's ID and what the choice is about (draw), not numbers
// taken from a stream: a stream's numbers go to whichever attempt asks
// first, and the twin and the gateway interleave their attempts
// differently (goroutines, I/O), so they would draw apart. A hash gives
// each request its own number in both drivers, in every order, and a
// request keeps its route across its attempts.
//
// Salts keep each kind of choice independent of the others.
const (
	saltRoute   = 1 // a canary's route (drawRoute)
	saltShadow  = 2 // a shadow copy (drawShadow)
	saltFate    = 3 // an attempt's fate under a fault that fails a share of attempts
	saltBackoff = 4 // a retry's backoff jitter
	saltAnswer  = 5 // how long a fault's answer takes to come back
	saltXfer    = 6 // a KV transfer's fate under kv-transfer-failure
)

// TransferFate is the uniform draw in [0, 1) that decides whether the KV
// transfer of request id's attempt at its offer'th offer into decode
// replica fails, under a fault that fails a share of transfers.
func TransferFate(seed, id uint64, offer, replica int) float64 {
	return draw(seed, id, saltXfer|uint64(offer)<<8|uint64(replica)<<32)
}

// AnswerDraw is the uniform draw in [0, 1) that times the answer a fault
// gives in place of the backend (a 429, a 5xx) to the attempt of request
// id at its offer'th offer on replica (faults.AnswerDelay).
func AnswerDraw(seed, id uint64, offer, replica int) float64 {
	return draw(seed, id, saltAnswer|uint64(offer)<<8|uint64(replica)<<32)
}

// AttemptFate is the uniform draw in [0, 1) that decides whether the
// attempt of request id made at its offer'th offer (Life.Attempts) on
// replica fails, under a fault that fails a share of attempts (an error
// burst, a brownout): a hedged duplicate, on another replica, draws its
// own.
func AttemptFate(seed, id uint64, offer, replica int) float64 {
	return draw(seed, id, saltFate|uint64(offer)<<8|uint64(replica)<<32)
}

// BackoffDraw is the uniform draw in [0, 1) of the backoff jitter after
// the offer'th offer of request id (Life.Attempts): Lifecycle's draw.
func BackoffDraw(seed, id uint64, offer int) float64 {
	return draw(seed, id, saltBackoff|uint64(offer)<<8)
}

// Backoff is Lifecycle's draw for request req, whose life is l: its
// BackoffDraw at the offer it is at when drawn. Both drivers pass it.
func Backoff(seed uint64, req *Request, l *Life) func() float64 {
	return func() float64 { return BackoffDraw(seed, req.ID, l.Attempts) }
}
