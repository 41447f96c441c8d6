import { normalizePhone, phoneMatchKeys, phoneVariants } from '../../src/shared/phone';

// Phone normalization: every accepted spelling of a number, and what is rejected.
const AR_BA = '+5491155551234';
const AR_CBA = '+5493515551234';
const AR_MDP = '+5492234567890';

const accepted: Array<[string, string, string]> = [
  // [description, input, canonical E.164]
  ['E.164', '+5491155551234', AR_BA],
  ['E.164 with spaces and dashes', '+54 9 11 5555-1234', AR_BA],
  ['E.164 without +', '5491155551234', AR_BA],
  ['E.164 without + with spaces', '54 9 11 5555 1234', AR_BA],
  ['provider form 54 11 (without the 9)', '541155551234', AR_BA],
  ['provider form with +', '+54 11 5555 1234', AR_BA],
  ['national with 0 and 15', '011 15 5555-1234', AR_BA],
  ['national with 15, no 0', '11 15 5555 1234', AR_BA],
  ['national with parentheses', '(011) 15-5555-1234', AR_BA],
  ['national 9 + area code', '9 11 5555 1234', AR_BA],
  ['national 0 9 + area code', '0 9 11 5555 1234', AR_BA],
  ['national without 15 or 9', '11 5555 1234', AR_BA],
  ['national with 0, without 15', '011 5555 1234', AR_BA],
  ['national digits only', '1155551234', AR_BA],
  ['international prefix 00', '0054 9 11 5555 1234', AR_BA],
  ['dots as separators', '+54.9.11.5555.1234', AR_BA],
  ['tel: URI', 'tel:+54-9-11-5555-1234', AR_BA],
  ['surrounding whitespace', '  +5491155551234  ', AR_BA],
  ['Cordoba, E.164', '+54 9 351 555 1234', AR_CBA],
  ['Cordoba, national with 0 and 15', '0351 15 555 1234', AR_CBA],
  ['Cordoba, national with 15', '351 15 555 1234', AR_CBA],
  ['Cordoba, provider form', '543515551234', AR_CBA],
  ['Mar del Plata, national with 15', '0223 15 456 7890', AR_MDP],
  ['Mar del Plata, E.164', '+54 9 223 456 7890', AR_MDP],
  ['Mar del Plata, 10 digits (Argentina wins over +223)', '2234567890', AR_MDP],
  ['US with +', '+1 415 555 2671', '+14155552671'],
  ['US without +', '14155552671', '+14155552671'],
  ['US with parentheses', '+1 (415) 555-2671', '+14155552671'],
  ['UK mobile without +', '447911123456', '+447911123456'],
  ['Spain', '+34 612 34 56 78', '+34612345678'],
  ['Brazil mobile', '+55 11 98765-4321', '+5511987654321'],
  ['Germany, 00 prefix', '0049 151 12345678', '+4915112345678'],
  ['Uruguay', '+598 99 123 456', '+59899123456'],
  ['Mexico', '+52 55 1234 5678', '+525512345678'],
  ['Mexico, old mobile form 52 1', '+52 1 55 1234 5678', '+525512345678'],
];

const rejected: Array<[string, string]> = [
  ['empty', ''],
  ['blank', '   '],
  ['letters', 'abc'],
  ['letters mixed in', '+54 9 11 5555 12a4'],
  ['too short', '+54 11'],
  ['too long', '+54 9 11 5555 1234 5678 9012'],
  ['two plus signs', '++5491155551234'],
  ['plus in the middle', '54+91155551234'],
  ['invalid US area code', '+1 055 555 2671'],
  ['national 15 without area code', '15 5555 1234'],
  ['an extension', '+5491155551234 ext 12'],
  ['unassigned country code', '+999 1234 5678'],
  ['local number of another country without its code', '612 34 56 78'],
];

describe('normalizePhone: accepted spellings', () => {
  it.each(accepted)('%s: %j', (_d, input, expected) => {
    expect(normalizePhone(input)).toBe(expected);
  });
});

describe('normalizePhone: rejected inputs', () => {
  it.each(rejected)('%s: %j', (_d, input) => {
    expect(normalizePhone(input)).toBeNull();
  });
});

describe('phoneVariants', () => {
  it.each([
    ['+5491155551234', ['+5491155551234', '+541155551234']],
    ['+541155551234', ['+541155551234', '+5491155551234']],
    ['+525512345678', ['+525512345678', '+5215512345678']],
    ['+14155552671', ['+14155552671']],
  ])('%s', (e164, variants) => {
    expect(phoneVariants(e164)).toEqual(variants);
  });

  it('every accepted Argentine spelling of a number matches the contact stored as +549...', () => {
    for (const [, input, expected] of accepted.filter(([, , e]) => e === AR_BA)) {
      expect(phoneMatchKeys(input)).toContain(expected);
    }
  });

  it('an invalid input matches nothing', () => {
    expect(phoneMatchKeys('not a phone')).toEqual([]);
  });
});
