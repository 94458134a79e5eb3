package store

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ParseKind returns the collection named s (Kind.String), or an error.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds() {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown record kind %q", s)
}

// record returns the record a put mutation carries, as the value to encode.
func (m Mutation) record() (any, error) {
	switch m.Kind {
	case KindReservation:
		return m.Reservation, nil
	case KindInstruction:
		return m.Instruction, nil
	case KindCredential:
		return m.Credential, nil
	case KindAdvertisement:
		return m.Advertisement, nil
	case KindConsumer:
		return m.Consumer, nil
	}
	return nil, fmt.Errorf("encode: unknown record kind %s", m.Kind)
}

// MarshalRecord encodes the record of put mutation m as JSON: the one
// record encoding every store implementation keeps (each may wrap it, e.g.
// with a version byte).
func MarshalRecord(m Mutation) ([]byte, error) {
	v, err := m.record()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s %q: %w", m.Kind, m.Key, err)
	}
	return b, nil
}

// UnmarshalRecord decodes the JSON of a record of kind k (MarshalRecord's
// output) into a put mutation. It refuses malformed JSON and records
// without their key fields.
func UnmarshalRecord(k Kind, body []byte) (Mutation, error) {
	var m Mutation
	var err error
	switch k {
	case KindReservation:
		m, err = decodeAs(body, PutReservation, func(r Reservation) bool { return r.ID != "" && r.ConsumerID != "" && r.ProviderID != "" },
			"reservation without id, consumer or provider")
	case KindInstruction:
		m, err = decodeAs(body, PutInstruction, func(in Instruction) bool { return in.ID != "" && in.TargetID != "" && in.Kind != "" },
			"instruction without id, target or kind")
	case KindCredential:
		m, err = decodeAs(body, PutCredential, func(c Credential) bool { return c.ConsumerID != "" && c.ProviderID != "" },
			"credential without consumer or provider")
	case KindAdvertisement:
		m, err = decodeAs(body, PutAdvertisement, func(a Advertisement) bool { return a.Request.ClusterID != "" },
			"advertisement without cluster id")
	case KindConsumer:
		m, err = decodeAs(body, PutConsumer, func(c Consumer) bool { return c.Heartbeat.ClusterID != "" },
			"consumer without cluster id")
	default:
		return Mutation{}, fmt.Errorf("decode: unknown record kind %s", k)
	}
	if err != nil {
		return Mutation{}, fmt.Errorf("decode %s: %w", k, err)
	}
	return m, nil
}

// decodeAs decodes body as a T, refuses it with missing unless complete
// says it names what it must, and returns it as put's mutation.
func decodeAs[T any](body []byte, put func(T) Mutation, complete func(T) bool, missing string) (Mutation, error) {
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return Mutation{}, err
	}
	if !complete(v) {
		return Mutation{}, errors.New(missing)
	}
	return put(v), nil
}

// Add appends the record of put mutation m to the snapshot's collection of
// its kind (a delete or a malformed mutation adds nothing).
func (s *Snapshot) Add(m Mutation) {
	switch {
	case m.Reservation != nil:
		s.Reservations = append(s.Reservations, *m.Reservation)
	case m.Instruction != nil:
		s.Instructions = append(s.Instructions, *m.Instruction)
	case m.Credential != nil:
		s.Credentials = append(s.Credentials, *m.Credential)
	case m.Advertisement != nil:
		s.Advertisements = append(s.Advertisements, *m.Advertisement)
	case m.Consumer != nil:
		s.Consumers = append(s.Consumers, *m.Consumer)
	}
}

// Puts returns the mutations that store every record of s, in Kinds order.
func (s Snapshot) Puts() []Mutation {
	m := make([]Mutation, 0, len(s.Reservations)+len(s.Instructions)+len(s.Credentials)+len(s.Advertisements)+len(s.Consumers))
	for _, r := range s.Reservations {
		m = append(m, PutReservation(r))
	}
	for _, in := range s.Instructions {
		m = append(m, PutInstruction(in))
	}
	for _, c := range s.Credentials {
		m = append(m, PutCredential(c))
	}
	for _, a := range s.Advertisements {
		m = append(m, PutAdvertisement(a))
	}
	for _, c := range s.Consumers {
		m = append(m, PutConsumer(c))
	}
	return m
}
